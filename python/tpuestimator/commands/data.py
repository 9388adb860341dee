"""`tpuestimator data write|inspect|bench|serve`: TFRecord conversion, inspection, input benchmarks
and a local tf.data service.

No TensorFlow import at module level (the CLI's --help stays fast).
"""
from __future__ import annotations

import argparse
import json
import sys


def register(subparsers) -> argparse.ArgumentParser:
    """Adds the `data` command (sub-commands write, inspect, bench) to the CLI's sub-parsers."""
    parser = subparsers.add_parser("data", help="write, inspect and benchmark TFRecord data",
                                   description="Write TFRecords (MNIST or flowers format, or typed features), inspect them, "
                                               "and measure the input pipeline.")
    sub = parser.add_subparsers(dest="data_command", metavar="{write,inspect,bench,serve}")
    sub.required = True

    w = sub.add_parser("write", help="convert an image folder, CSV, or .npz to TFRecord shards + manifest.json",
                       description="Image folder (one subfolder per class, JPEG/PNG) -> the flowers example's format; "
                                   "MNIST-format IDX files (images + labels, gzipped or not) -> the MNIST format; "
                                   ".csv / .npz -> typed features.")
    w.add_argument("source", help="image folder, .npz file, an MNIST-format IDX images file (e.g. "
                   "train-images-idx3-ubyte.gz, its labels file found by name or given with --labels), or a table "
                   "(.csv / .parquet with --label: feature columns inferred, see docs/tables.md)")
    w.add_argument("out", help="output folder (shards + manifest.json)")
    w.add_argument("--split", default=None,
                   help="eval fraction (default 0.2; 0 = train only) or 'folder' for train/ and eval/ subfolders")
    w.add_argument("--shards", type=int, default=1, help="files per split (default 1)")
    w.add_argument("--seed", type=int, default=0, help="seeds the split and record order (default 0)")
    w.add_argument("--label", default=None, help="label column of a CSV / .npz (default 'label' if present)")
    w.add_argument("--labels", default=None, metavar="FILE",
                   help="the IDX labels file of an IDX images source (default: named like it, "
                        "train-images-idx3-ubyte -> train-labels-idx1-ubyte)")
    w.add_argument("--vocabulary", default=None, help="class names in id order: a comma list or a text file")
    w.add_argument("--feature", action="append", default=[], metavar="NAME:DTYPE[:SHAPE]",
                   help="declare a column's dtype (float32, int64, string) and shape (e.g. x:float32:4x4); repeat")
    w.add_argument("--image-size", default=None, metavar="HxW", help="resize folder images (re-encoded as JPEG)")
    w.add_argument("--format", choices=["mnist"], default=None, help="force the MNIST TFRecord format for a uint8 array")
    w.add_argument("--task", choices=["classification", "regression"], default=None,
                   help="a table's label: class ids or a number (default inferred from the label column)")
    w.add_argument("--missing", action="append", default=[], metavar="[COLUMN=]POLICY",
                   help="a table's missing-value policy (mean, zero, oov), for every column or one")
    w.add_argument("--overwrite", action="store_true", help="replace the records of an existing output folder")
    w.add_argument("--beam", action="store_true", help="run the conversion as an Apache Beam pipeline")
    w.add_argument("--runner", default="DirectRunner", help="Beam runner (default DirectRunner)")
    w.add_argument("--json", action="store_true", help="print the manifest as JSON")
    w.add_argument("--beam-option", dest="beam_args", action="append", default=[], metavar="FLAG",
                   help="a Beam pipeline option passed through, e.g. --beam-option=--project=my-project; repeat")
    w.set_defaults(func=run)

    i = sub.add_parser("inspect", help="spec, record counts, decoded examples and a PNG grid of samples",
                       description="PATTERN is a glob of TFRecord files, a manifest.json / its folder, or a config.")
    i.add_argument("pattern")
    i.add_argument("-n", type=int, default=8, help="examples to decode (default 8)")
    i.add_argument("--grid", default="samples.png", help="PNG grid of image samples (default samples.png; "
                                                          "'' for none)")
    i.add_argument("--mode", choices=["train", "eval"], default="train", help="split of a config to inspect")
    i.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=run)

    b = sub.add_parser("bench", help="records/s of the input pipeline against the raw read rate",
                       description="Runs the configured input pipeline alone and a raw TFRecordDataset read.")
    b.add_argument("config", help="config file (or manifest / pattern)")
    b.add_argument("--mode", choices=["train", "eval"], default="train")
    b.add_argument("--batch-size", type=int, default=None)
    b.add_argument("--seconds", type=float, default=3.0, help="measuring time per rate (default 3)")
    b.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=run)

    s = sub.add_parser("serve", help="run a tf.data service (dispatcher + workers) until Ctrl-C",
                       description="Starts TensorFlow's tf.data service dispatcher and N workers in this process and "
                                   "prints the address for `data.service`; Ctrl-C (or SIGTERM) stops them.")
    s.add_argument("--dispatcher", type=int, default=5050, metavar="PORT",
                   help="dispatcher port (default 5050; 0 = any free port)")
    s.add_argument("--workers", type=int, default=2, help="worker servers to start (default 2)")
    s.add_argument("--join", default=None, metavar="grpc://HOST:PORT",
                   help="start workers only, for a dispatcher running elsewhere (a worker pod)")
    s.add_argument("--worker-port", type=int, action="append", default=None, metavar="PORT",
                   help="a fixed worker port, once per worker (default: free ports)")
    s.add_argument("--advertise", default="localhost", metavar="HOST",
                   help="host name the servers give readers (default localhost; a pod's IP on Kubernetes)")
    s.add_argument("--host", default="127.0.0.1", help="interface checked for free ports (default 127.0.0.1)")
    s.set_defaults(func=run)
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Runs `data write|inspect|bench`; returns the exit status (2 for a data error)."""
    from tpuestimator.errors import TPUEstimatorError

    try:
        return {"write": _write, "inspect": _inspect, "bench": _bench, "serve": _serve}[args.data_command](args)
    except TPUEstimatorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _features(specs: list[str]) -> dict:
    from tpuestimator.errors import ConfigError

    out = {}
    for item in specs:
        parts = item.split(":")
        if len(parts) not in (2, 3) or parts[1] not in ("float32", "int64", "string"):
            raise ConfigError("--feature", item, "NAME:DTYPE[:SHAPE] with DTYPE float32, int64 or string, e.g. x:float32:16")
        out[parts[0]] = {"dtype": parts[1]}
        if len(parts) == 3:
            out[parts[0]]["shape"] = [int(v) for v in parts[2].split("x")]
    return out


def _write(args) -> int:
    import os

    from tpuestimator.data import idx
    from tpuestimator.data.writers import write_tfrecords
    from tpuestimator.errors import ConfigError

    split = args.split
    if split not in (None, "folder"):
        try:
            split = float(split)
        except ValueError:
            raise ConfigError("--split", args.split, "an eval fraction such as 0.2, or 'folder'") from None
    vocab = None
    if args.vocabulary:
        if os.path.isfile(args.vocabulary):
            with open(args.vocabulary) as fh:
                vocab = [line.strip() for line in fh if line.strip()]
        else:
            vocab = [v.strip() for v in args.vocabulary.split(",")]
    size = None
    if args.image_size:
        try:
            size = [int(v) for v in args.image_size.lower().split("x")]
            assert len(size) == 2
        except (ValueError, AssertionError):
            raise ConfigError("--image-size", args.image_size, "HEIGHTxWIDTH, e.g. 224x224") from None
    extra = list(args.beam_args)
    if _is_table(args):
        return _write_table(args, split)
    if args.labels and not idx.is_idx_path(args.source):
        raise ConfigError("--labels", args.labels, "only with an IDX images source (e.g. train-images-idx3-ubyte.gz); "
                          "for other sources name the label column with --label")
    manifest = write_tfrecords(args.source, args.out, labels=args.labels, split=split, shards=args.shards,
                               seed=args.seed, label=args.label, vocabulary=vocab, features=_features(args.feature) or None,
                               image_size=size, format=args.format, overwrite=args.overwrite, beam=args.beam,
                               runner=args.runner, pipeline_options=extra)
    if args.json:
        print(json.dumps(manifest, indent=2))
        return 0
    print(f"wrote {manifest['format']} records to {os.path.dirname(manifest['path'])}")
    for split_name, info in manifest["splits"].items():
        classes = ", ".join(f"{c}={n}" for c, n in info["class_counts"].items())
        print(f"  {split_name}: {info['count']} records in {len(info['files'])} shard(s)  [{classes}]")
    print(f"  manifest: {manifest['path']}  (use `data: {{manifest: {manifest['path']}}}` in a config)")
    return 0


def _is_table(args) -> bool:
    """A .csv / .parquet with a label and no typed-feature declarations is a table."""
    table_source = str(args.source).lower().endswith((".csv", ".parquet", ".pq"))
    return table_source and bool(args.label) and not (args.feature or args.vocabulary or args.format or args.beam)


def _write_table(args, split) -> int:
    import os

    from tpuestimator.errors import ConfigError
    from tpuestimator.models.feature_columns import table_summary
    from tpuestimator.tables.write import write_table

    if split == "folder":
        raise ConfigError("--split", "folder", "an eval fraction such as 0.2 for a table")
    missing: dict[str, str] | str | None = None
    for item in args.missing:
        if "=" in item:
            column, _, policy = item.partition("=")
            missing = {**(missing if isinstance(missing, dict) else {}), column: policy}
        else:
            missing = item
    manifest = write_table(args.source, args.out, label=args.label, task=args.task,
                           split=0.2 if split is None else split, seed=args.seed, shards=args.shards,
                           missing=missing, overwrite=args.overwrite)
    if args.json:
        print(json.dumps(manifest, indent=2))
        return 0
    print(f"wrote a {manifest['task']} table (label {manifest['label']}) to {os.path.dirname(manifest['path'])}")
    for split_name, info in manifest["splits"].items():
        print(f"  {split_name}: {info['count']} records in {len(info['files'])} shard(s)")
    print("  feature columns (edit them in the manifest, or override them in data.feature_columns):")
    for line in table_summary(manifest["feature_columns"]).splitlines():
        print(f"    {line}")
    print(f"  manifest: {manifest['path']}  (use `data: {{manifest: {manifest['path']}}}` in a config)")
    return 0


def _inspect(args) -> int:
    from tpuestimator.data.inspect import format_report, inspect

    report = inspect(args.pattern, n=args.n, grid_path=args.grid or None, mode=args.mode,
                     overrides=tuple(args.overrides))
    print(json.dumps(report, indent=2, default=str) if args.json else format_report(report))
    return 1 if report["corrupt"] or report["problems"] else 0


def _bench(args) -> int:
    from tpuestimator.data.bench import bench, format_report

    report = bench(args.config, mode=args.mode, batch_size=args.batch_size, seconds=args.seconds,
                   overrides=tuple(args.overrides))
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0


def _serve(args) -> int:
    import signal
    import time

    from tpuestimator.data.service import start_local_service

    stop_requested = []
    # Ctrl-C and SIGTERM (a Kubernetes pod stopping, a parent process) both stop cleanly, from
    # before the servers start: handled by flag, a Ctrl-C while they start or just after (a
    # reader that sends it as soon as the address is logged) no longer leaves as "interrupted"
    # (exit 130) with the servers never stopped.
    # (A flag, not a threading.Event: a handler setting an Event can deadlock on the lock its
    # own thread holds inside Event.wait.)
    signal.signal(signal.SIGINT, lambda *_: stop_requested.append(True))
    signal.signal(signal.SIGTERM, lambda *_: stop_requested.append(True))
    service = start_local_service(dispatcher_port=args.dispatcher, workers=args.workers, host=args.host,
                                  advertise=args.advertise, join=args.join, worker_ports=args.worker_port)
    role = f"{len(service.workers)} worker(s) joined {service.address}" if args.join else \
        f"tf.data service at {service.address} with {len(service.workers)} worker(s)"
    print(f"{role}: {', '.join(service.worker_addresses) or 'no workers'}", flush=True)
    if not args.join:
        print(f"  train with: --set data.service={service.address}   (Ctrl-C stops)", flush=True)
    while not stop_requested:
        time.sleep(0.2)  # a signal interrupts the sleep and runs its handler
    return stop_service(service)


# How long a stop may take before the process leaves anyway: a stop must always end the process
# (a Kubernetes pod's grace period, a CI job), whatever the servers' threads are waiting for.
SERVE_STOP_SECONDS = 30


def stop_service(service, timeout: float = SERVE_STOP_SECONDS) -> int:
    """Stops the servers (`service.stop()`) in a helper thread and waits at most `timeout`
    seconds (a second Ctrl-C ends the wait); returns 0 once stopped. A stop that did not finish
    by then ends the process (exit status 0) without waiting for its threads."""
    import os
    import signal
    import threading

    stopped = threading.Event()
    if threading.current_thread() is threading.main_thread():
        # a second Ctrl-C while stopping ends the wait (leaves without the servers)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def stop_servers():
        service.stop()
        stopped.set()

    threading.Thread(target=stop_servers, name="tf.data service stop", daemon=True).start()
    try:
        finished = stopped.wait(timeout)
    except KeyboardInterrupt:
        finished = stopped.is_set()
    if finished:
        print("tf.data service stopped", flush=True)
        return 0
    print(f"tf.data service stopped without waiting: its servers did not finish stopping within "
          f"{timeout:g} s (readers may still be connected)", flush=True)
    sys.stderr.flush()
    os._exit(0)  # the servers' threads are stuck in TensorFlow: no interpreter shutdown to wait for
