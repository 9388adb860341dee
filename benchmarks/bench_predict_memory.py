"""Peak memory of batch prediction from an export (`tpuestimator predict EXPORT PATTERN --out`)
over 100,000 records, against 10,000 records and against collecting every prediction in memory.

Workload: 100,000 random records in the MNIST TFRecord format (28x28x1 uint8, 10 shards),
an export of the `linear` model trained 50 steps on them (the model's size does not change
what is measured: what grows with the number of records). Each measurement is a fresh
process that loads the export, predicts and reports its peak resident set size
(`resource.getrusage(RUSAGE_SELF).ru_maxrss`, the whole process) and the peak over its RSS
after importing TensorFlow (`peak_over_import_mb`: loading the export and predicting; the
peak is reset through /proc/self/clear_refs so TensorFlow's start-up peak does not hide it):

- `floor`: load the export and predict one batch (1,024 records): the fixed cost
  (TensorFlow, the SavedModel, one batch);
- `stream_csv_10k`, `stream_csv_100k`, `stream_parquet_100k`: `export_jobs.predict_to_file`
  (batch 1024) on 10,000 / 100,000 records;
- `in_memory_100k` (reference): `serving.predict`, which decodes every record into one array
  and returns a list of dicts (what streaming avoids).

`--smoke` (2,000 records unless `--records`) runs the measures one after another in ONE fresh
process, each peak the process's VmHWM since that measure began: it checks the script, not memory.

Ratio reported: peak(stream 100k) / peak(stream 10k) (flat memory: about 1). Target: the
streaming peak over 100,000 records stays under 1 GB.

    .venv/bin/python benchmarks/bench_predict_memory.py [--smoke] [--records N]
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.setup_path()

TARGET_MB = 1024.0

MEASURE = textwrap.dedent('''
    import json, resource, sys, time
    import tensorflow  # noqa: F401  (imported before the peak is reset: its own start-up peak is left out)
    from tpuestimator.serving.batch_predict import ExportPredictor, iter_predictions
    from tpuestimator.jobs.export_jobs import predict_to_file
    from tpuestimator.serving import predict

    def status(key):   # MB
        return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(key)) / 1024

    export, measures = sys.argv[1], json.loads(sys.argv[2])   # [[mode, out, files], ...]
    for mode, out, files in measures:
        open("/proc/self/clear_refs", "w").write("5")   # the peak (VmHWM) restarts from the current RSS
        start_mb = status("VmRSS")
        t = time.perf_counter()
        if mode == "stream":
            rows = predict_to_file(export, files, out, batch_size=1024)["rows"]
        elif mode == "floor":
            rows = len(next(iter_predictions(ExportPredictor(export), files[:1], batch_size=1024)))
        else:
            rows = len(predict(export, files, batch_size=1024))
        print("RESULT " + json.dumps({
            "rows": rows, "seconds": time.perf_counter() - t,
            # the whole process; a measure sharing its process (smoke): the peak since its start
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 if len(measures) == 1
            else status("VmHWM"),
            "rss_after_import_mb": start_mb,
            "peak_over_import_mb": status("VmHWM") - start_mb}), flush=True)   # loading the export + predicting
''')


def measure(export: str, measures: list[tuple[str, str, list[str]]], env: dict) -> list[dict]:
    """Runs the measures [(mode, output file, input files)] one after another in ONE fresh process."""
    proc = subprocess.run([sys.executable, "-c", MEASURE, export, json.dumps(measures)], env=env,
                          capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"{[m[0] for m in measures]} failed:\n{proc.stderr[-3000:]}")
    results = [json.loads(ln[len("RESULT "):]) for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    for result, (_, out, _) in zip(results, measures, strict=True):
        if os.path.exists(out):
            result["output_mb"] = os.path.getsize(out) / 2**20
    return results


def main(argv=None) -> int:
    args = common.standard_args(__doc__.splitlines()[0], argv, default_repeats=1, extra=lambda p: (
        p.add_argument("--records", type=int, default=None, help="records for the large run (default 100000)"),
        p.add_argument("--no-in-memory", action="store_true", help="skip the in-memory reference")))
    n_large = args.records or (2_000 if args.smoke else 100_000)
    n_small = max(1, n_large // 10)
    shards = 10
    work = Path(common.temp_dir("predict-memory"))
    t0 = time.perf_counter()
    common.write_mnist_records(work / "records", n=n_large, shards=shards)
    files = sorted(str(p) for p in (work / "records").glob("mnist-*.tfrecord"))
    small_files = files[:1]   # one shard = n_large / 10 records
    print(f"wrote {n_large} records in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)

    from tpuestimator.jobs.job import run_job

    config = {"name": "predict-memory", "model": "linear", "params": {"num_classes": common.NUM_CLASSES},
              "data": dict(common.data_section(files[0]), cache=False),
              "train": {"batch_size": 128, "max_steps": 50, "iterations_per_loop": 50,
                        "save_checkpoints_steps": 50},
              "eval": {"batch_size": 128}, "run": {"strategy": "cpu"}, "export": {"exporters": ["final"]}}
    result = run_job(config, model_dir=str(work / "model"), runs_dir=str(work / "runs"))
    export = result.export_dir
    env = dict(os.environ, PYTHONPATH=str(common.REPO / "python"), TF_CPP_MIN_LOG_LEVEL="2")
    runs = {}
    plan = [("floor", "floor", files, "floor.csv"),
            ("stream_csv_small", "stream", small_files, "small.csv"),
            ("stream_csv_large", "stream", files, "large.csv"),
            ("stream_parquet_large", "stream", files, "large.parquet")]
    if not args.no_in_memory:
        plan.append(("in_memory_large", "in_memory", files, "none"))
    # A fresh process per measure (its peak is the figure); smoke: one for all (each TensorFlow
    # start-up costs ~8 CPU s, and the smoke figures are no measurements).
    batches = [plan] if args.smoke else [[step] for step in plan]
    for batch in batches:
        measured = measure(export, [(mode, str(work / out), inputs) for _, mode, inputs, out in batch], env)
        for (name, *_), result in zip(batch, measured, strict=True):
            runs[name] = result
            print(f"  {name}: {runs[name]}", file=sys.stderr, flush=True)
    rename = {"small": f"{n_small // 1000}k" if n_small >= 1000 else str(n_small),
              "large": f"{n_large // 1000}k" if n_large >= 1000 else str(n_large)}
    results = {}
    for name, value in runs.items():
        for key, label in rename.items():
            name = name.replace(key, label)
        results[name] = value
    large, small = runs["stream_csv_large"], runs["stream_csv_small"]
    ratios = {"peak stream large/small": {"median": large["peak_mb"] / small["peak_mb"], "n": 1,
                                          "records": [n_large, n_small]},
              "peak over import, stream large/small": {
                  "median": large["peak_over_import_mb"] / small["peak_over_import_mb"], "n": 1}}
    worst = max(large["peak_mb"], runs["stream_parquet_large"]["peak_mb"])
    targets = {f"peak MB, streaming {n_large} records": {"measured": worst, "target": f"< {TARGET_MB:.0f}",
                                                         "met": worst < TARGET_MB}}
    notes = [f"peak RSS in MB per fresh process; floor = load the export + one batch of 1024 records; "
             f"records {n_large} in {shards} shards (28x28x1 uint8), linear model, batch 1024"]
    if args.smoke:
        notes.append("smoke: every measure in one process, each peak the process's VmHWM since that measure began")
    path = common.write_results("predict_memory", args.out, smoke=args.smoke, args=vars(args), results=results,
                                ratios=ratios, targets=targets, notes=notes)
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
