"""Shared helpers for the benchmark scripts: interleaved timing, statistics, machine
description, result files, and the benchmark workloads (MNIST-format TFRecords, the
`linear` and `cnn` models).

The machine these run on is shared and noisy, so no absolute figure is a result: every
script runs the configurations it compares in ONE process, interleaved repeat by repeat
(`interleave` for whole passes; `run_gated` for training loops: each configuration in its
own thread, taking turns at loop boundaries), and reports per-repeat RATIOS
(`paired_ratio`, `loop_ratio`) with their spread (`summarize`: median, quartiles, range).

Every `benchmarks/bench_*.py` follows one command-line contract (`standard_args`):
`--smoke` (tiny sizes, seconds: what tests/python/test_benchmarks_smoke.py runs),
`--out DIR` (where the JSON goes; default benchmarks/results), `--repeats N`. Each writes
`<out>/<name>.json` through `write_results`, whose top level is
`{"benchmark", "smoke", "machine", "args", "results", "ratios", "targets", "notes"}`.

Nothing here imports TensorFlow at module level.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO / "benchmarks" / "results"
IMAGE_SHAPE = (28, 28, 1)
NUM_CLASSES = 10
STEPS_PER_LOOP = 100  # iterations_per_loop == steps_per_execution
BATCH_SIZE = 128
# A smoke run only proves a script runs and writes its result format: small cnn batches cut
# its compute by a third (tracing and XLA compilation, not the batch, dominate what is left).
SMOKE_BATCH_SIZE = 16
# ... and a narrower cnn (the same layers, a fourteenth of the FLOPs per image): its steps and
# passes were most of the compute left in the smoke runs. `standard_args` switches it on with
# --smoke (and off without), for `model_fn_for`.
SMOKE_MODEL_PARAMS = {"cnn": {"filters": [8, 16], "dense_units": 32}}
_smoke_models = False


def add_batch_size_arg(parser: argparse.ArgumentParser) -> None:
    """`--batch-size` with the default resolved by `standard_args`: BATCH_SIZE, or SMOKE_BATCH_SIZE with --smoke."""
    parser.add_argument("--batch-size", type=int, default=None,
                        help=f"training batch size (default {BATCH_SIZE}; smoke {SMOKE_BATCH_SIZE})")


def setup_path() -> None:
    """Makes `tpuestimator` importable from the checkout (no install needed) and quiets TF's C++ log."""
    src = str(REPO / "python")
    if src not in sys.path:
        sys.path.insert(0, src)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("PYTHONPATH", src)


# ---------------------------------------------------------------------------- arguments
def standard_args(description: str, argv: Sequence[str] | None = None,
                  extra: Callable[[argparse.ArgumentParser], None] | None = None,
                  default_repeats: int | None = 5) -> argparse.Namespace:
    """The shared command line; `default_repeats=None` leaves `args.repeats` None (the script decides)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs, measures nothing")
    parser.add_argument("--out", default=str(RESULTS_DIR), help="folder for the JSON result (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=None, help="interleaved repeats (default: the script's; smoke 2)")
    if extra is not None:
        extra(parser)
    args = parser.parse_args(argv)
    global _smoke_models
    _smoke_models = bool(args.smoke)   # the scripts run one after another in one process (smoke test)
    if getattr(args, "batch_size", 0) is None:
        args.batch_size = SMOKE_BATCH_SIZE if args.smoke else BATCH_SIZE
    if args.repeats is None and default_repeats is not None:
        args.repeats = 2 if args.smoke else default_repeats
    return args


# ---------------------------------------------------------------------------- statistics
def summarize(values: Sequence[float]) -> dict:
    """median, min, max, quartiles, relative spread ((max - min) / median), relative
    inter-quartile spread ((p75 - p25) / median) and the raw values."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not vals:
        return {"n": 0, "median": None, "min": None, "max": None, "p25": None, "p75": None, "spread": None,
                "iqr_spread": None, "values": []}
    med = statistics.median(vals)
    q1, q3 = (statistics.quantiles(vals, n=4, method="inclusive")[::2] if len(vals) > 1 else (vals[0], vals[0]))
    return {"n": len(vals), "median": med, "min": min(vals), "max": max(vals), "p25": q1, "p75": q3,
            "spread": (max(vals) - min(vals)) / med if med else None,
            "iqr_spread": (q3 - q1) / med if med else None, "values": vals}


def paired_ratio(numerator: Sequence[float], denominator: Sequence[float]) -> dict:
    """Per-repeat ratios numerator[i] / denominator[i] (same repeat = same machine load), summarized."""
    return summarize([a / b for a, b in zip(numerator, denominator) if a is not None and b])


def check_target(stats: dict, target: float, higher_is_better: bool = True) -> dict:
    """Adds `target`, `met` (the median meets it) and `miss_by` (relative shortfall) to a ratio summary."""
    med = stats.get("median")
    out = dict(stats, target=target, higher_is_better=higher_is_better)
    if med is None:
        out.update(met=None, miss_by=None)
    elif higher_is_better:
        out.update(met=med >= target, miss_by=None if med >= target else (target - med) / target)
    else:
        out.update(met=med <= target, miss_by=None if med <= target else (med - target) / target)
    return out


def interleave(runners: Mapping[str, Callable[[], Any]], repeats: int, *, rotate: bool = True) -> dict:
    """Runs every runner once per repeat, in an order that rotates each repeat (so no
    configuration always runs first or last), and returns {name: [result per repeat]}."""
    names = list(runners)
    out: dict[str, list] = {name: [] for name in names}
    for r in range(repeats):
        k = r % len(names) if rotate else 0
        for name in names[k:] + names[:k]:
            out[name].append(runners[name]())
    return out


class GateStop(Exception):
    """Raised inside a runner at a loop boundary when the conductor ends the benchmark."""


class Gate:
    """A loop-boundary turnstile for one runner running in its own thread.

    The runner calls `boundary()` at every loop boundary (before each device loop; for the
    Estimator in a hook's `before_loop`, for Keras in `on_train_batch_begin`). Each call
    records the wall and process-CPU time since the previous boundary (one loop plus all the
    host work around it) and, once the runner has used up the loops of its turn, blocks
    until the conductor (`run_gated`) gives it its next turn. Only one runner works at a
    time, so a loop's process CPU time is that runner's (all its threads, input included).
    """

    def __init__(self, name: str, timeout: float = 900.0):
        self.name = name
        self.go = threading.Event()
        self.done = threading.Event()
        self.stop = False
        self.timeout = timeout
        self.budget = 0
        self.loops: list[tuple[float, float]] = []  # (wall s, cpu s) per loop, every loop
        self.error: BaseException | None = None
        self._start: tuple[float, float] | None = None

    def boundary(self) -> None:
        now = (time.perf_counter(), time.process_time())
        if self._start is not None:
            self.loops.append((now[0] - self._start[0], now[1] - self._start[1]))
            self._start = None
        if self.budget <= 0:
            self.done.set()
            if not self.go.wait(self.timeout):
                raise GateStop(f"{self.name}: no go from the conductor in {self.timeout}s")
            self.go.clear()
            if self.stop:
                raise GateStop(self.name)
        self.budget -= 1
        self._start = (time.perf_counter(), time.process_time())


def run_gated(runners: Mapping[str, Callable[[Gate], None]], *, rounds: int, warmup: int = 1,
              turn: tuple[int, int] = (0, 1), log: Callable[[str], None] | None = None) -> dict:
    """Runs each `runner(gate)` in its own thread; in each round every runner gets one turn,
    in an order rotating each round. A turn is `turn = (settle, timed)` loops run back to
    back: the `settle` loops are not timed (the input pipeline, which ran ahead while the
    runner waited, drains back to its steady state), the `timed` ones are.

    Returns {name: [(wall s, cpu s, loops) of the timed loops of each round]}; the first
    `warmup` rounds (tracing, first fill of the input pipeline) are left out. A runner must
    call `gate.boundary()` before every loop and let `GateStop` propagate.
    """
    gates = {name: Gate(name) for name in runners}
    threads = {}
    settle, timed = turn
    per_turn: dict[str, list] = {name: [] for name in runners}

    def target(name, fn):
        gate = gates[name]
        try:
            fn(gate)
            raise RuntimeError(f"runner {name} returned before the benchmark ended (too few steps?)")
        except GateStop:
            pass
        except BaseException as exc:  # surfaced by the conductor
            gate.error = exc
        finally:
            gate.done.set()

    def wait_done(gate):
        if not gate.done.wait(gate.timeout):
            raise RuntimeError(f"runner {gate.name} did not reach a loop boundary in {gate.timeout}s")
        if gate.error is not None:
            raise RuntimeError(f"runner {gate.name} failed: {gate.error!r}") from gate.error

    try:
        for name, fn in runners.items():
            threads[name] = threading.Thread(target=target, args=(name, fn), name=f"bench-{name}", daemon=True)
            threads[name].start()
            wait_done(gates[name])  # built and at its first boundary, one at a time
        names = list(runners)
        for r in range(warmup + rounds):
            k = r % len(names)
            for name in names[k:] + names[:k]:
                gate = gates[name]
                before = len(gate.loops)
                gate.budget = settle + timed
                gate.done.clear()
                gate.go.set()
                wait_done(gate)
                if r >= warmup:
                    loops = gate.loops[before + settle:before + settle + timed]
                    per_turn[name].append((sum(w for w, _ in loops), sum(c for _, c in loops), len(loops)))
            if log and (r + 1) % max(1, (warmup + rounds) // 4) == 0:
                log(f"    round {r + 1}/{warmup + rounds}")
    finally:
        for gate in gates.values():
            gate.stop = True
            gate.budget = 0
            gate.go.set()
        for t in threads.values():
            t.join(60)
    return per_turn


def fit_gated(model, dataset, gate: Gate) -> None:
    """Keras `model.fit` over `dataset` until the gate stops it, calling `gate.boundary()` before
    every loop (`steps_per_execution` steps); the loss is read back each loop, as a user's
    progress bar would, so a loop's time includes its device-to-host read."""
    import keras

    class Boundary(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            gate.boundary()

        def on_train_batch_end(self, batch, logs=None):
            float(logs["loss"])

    model.fit(dataset, epochs=1, steps_per_epoch=10**9, verbose=0, callbacks=[Boundary()])


def train_gated(estimator, input_fn, hooks: Sequence[Any], gate: Gate) -> None:
    """`Estimator.train` until the gate stops it, calling `gate.boundary()` before every loop;
    the boundary hook runs last, so the other hooks' work falls inside the timed loop."""
    from tpuestimator.hooks import Hook

    class Boundary(Hook):
        def before_loop(self, step):
            gate.boundary()

    estimator.train(input_fn, steps=10**9, hooks=[*hooks, Boundary()], save_final_checkpoint=False)


def _turns(items) -> list[tuple[float, float, int]]:
    """(wall s, cpu s, loops) per item; a 2-tuple (wall s, cpu s) is one loop."""
    return [(t[0], t[1], t[2] if len(t) > 2 else 1) for t in items]


def loop_stats(turns: Sequence[tuple], steps_per_loop: int = STEPS_PER_LOOP) -> dict:
    """steps/s per turn (summarized), overall steps/s, and CPU ms per 100 steps (summarized).
    Items are (wall s, cpu s, loops) as `run_gated` returns them, or (wall s, cpu s) per loop."""
    turns = _turns(turns)
    return {"steps_per_sec": summarize([n * steps_per_loop / w for w, _, n in turns]),
            "overall_steps_per_sec": (sum(n for _, _, n in turns) * steps_per_loop / sum(w for w, _, _ in turns)
                                      if turns else None),
            "cpu_ms_per_100_steps": summarize([1000 * c * 100 / (n * steps_per_loop) for _, c, n in turns])}


def loop_ratio(a: Sequence[tuple], b: Sequence[tuple]) -> dict:
    """Round-by-round steps/s ratio a/b (same round = same machine load), the overall ratio,
    and the CPU-work ratio (b's CPU per step / a's: > 1 when a does less work per step)."""
    a, b = _turns(a), _turns(b)
    return {"steps_per_sec": summarize([(wb / nb) / (wa / na) for (wa, _, na), (wb, _, nb) in zip(a, b)]),
            "overall": ((sum(w for w, _, _ in b) / sum(n for _, _, n in b)) /
                        (sum(w for w, _, _ in a) / sum(n for _, _, n in a))) if a and b else None,
            "cpu_efficiency": summarize([(cb / nb) / (ca / na) for (_, ca, na), (_, cb, nb) in zip(a, b) if ca > 0])}


# ---------------------------------------------------------------------------- machine
def machine() -> dict:
    """What the figures came from: CPU model, cores, memory, load, TF/Keras versions, GPUs."""
    info: dict[str, Any] = {"platform": platform.platform(), "python": platform.python_version(),
                            "logical_cpus": os.cpu_count()}
    try:
        info["usable_cpus"] = len(os.sched_getaffinity(0))
    except AttributeError:
        pass
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        info["cpu_model"] = fields.get("Model name")
        for key in ("Thread(s) per core", "Core(s) per socket", "Socket(s)", "Hypervisor vendor"):
            if key in fields:
                info[key.lower().replace("(s)", "s").replace(" ", "_")] = fields[key]
    except (OSError, subprocess.SubprocessError):
        info["cpu_model"] = platform.processor() or None
    try:
        with open("/proc/meminfo") as fh:
            kb = int(fh.readline().split()[1])
        info["memory_gib"] = round(kb / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    try:
        info["loadavg_at_start"] = list(os.getloadavg())
    except OSError:
        pass
    try:
        import keras
        import tensorflow as tf

        info["tensorflow"] = tf.__version__
        info["keras"] = keras.__version__
        gpus = tf.config.list_physical_devices("GPU")
        info["gpus"] = [tf.config.experimental.get_device_details(g).get("device_name", g.name) for g in gpus]
        info["tf_cuda_build"] = bool(tf.test.is_built_with_cuda())
    except Exception as exc:  # a machine description must never fail a benchmark
        info["tensorflow_error"] = repr(exc)
    return info


def write_results(name: str, out_dir: str | os.PathLike, *, smoke: bool, args: Mapping[str, Any],
                  results: Mapping[str, Any], ratios: Mapping[str, Any] | None = None,
                  targets: Mapping[str, Any] | None = None, notes: Sequence[str] = (),
                  machine_info: Mapping[str, Any] | None = None) -> Path:
    """Writes `<out_dir>/<name>.json` atomically and returns its path."""
    payload = {
        "benchmark": name, "smoke": bool(smoke), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": dict(machine_info or machine()), "args": dict(args), "results": results,
        "ratios": dict(ratios or {}), "targets": dict(targets or {}), "notes": list(notes),
    }
    try:
        payload["machine"]["loadavg_at_end"] = list(os.getloadavg())
    except OSError:
        pass
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(_json_safe(payload), indent=1, sort_keys=False) + "\n")
    os.replace(tmp, path)
    return path


def _json_safe(x):
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, Mapping):
        return {str(k): _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    if hasattr(x, "item") and callable(x.item):  # numpy scalars
        return _json_safe(x.item())
    return x


def fmt_ratio(stats: Mapping[str, Any], digits: int = 2) -> str:
    """`1.23 (IQR 1.15-1.28, range 1.02-1.40, n=30)`."""
    if not stats or stats.get("median") is None:
        return "n/a"
    f = f"{{:.{digits}f}}".format
    return (f"{f(stats['median'])} (IQR {f(stats['p25'])}-{f(stats['p75'])}, "
            f"range {f(stats['min'])}-{f(stats['max'])}, n={stats['n']})")


# ---------------------------------------------------------------------------- workloads
def write_mnist_records(out_dir: str | os.PathLike, n: int = 10_000, *, shards: int = 1, seed: int = 0) -> str:
    """Writes `n` random records in the MNIST TFRecord format (`image_raw`: 784 uint8 bytes,
    `label`: int64) into `shards` files; returns the file pattern."""
    import numpy as np
    import tensorflow as tf

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, int(np.prod(IMAGE_SHAPE))), dtype=np.uint8)
    labels = rng.integers(0, NUM_CLASSES, size=n)
    per = -(-n // shards)
    for s in range(shards):
        with tf.io.TFRecordWriter(str(out / f"mnist-{s:05d}-of-{shards:05d}.tfrecord")) as writer:
            for i in range(s * per, min(n, (s + 1) * per)):
                ex = tf.train.Example(features=tf.train.Features(feature={
                    "image_raw": tf.train.Feature(bytes_list=tf.train.BytesList(value=[images[i].tobytes()])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(labels[i])])),
                }))
                writer.write(ex.SerializeToString())
    return str(out / "mnist-*.tfrecord")


def data_section(pattern: str) -> dict:
    """The config `data` section reading these records through tpuestimator's own pipeline."""
    return {"format": "mnist", "train": pattern, "eval": pattern, "cache": True,
            "image": {"height": IMAGE_SHAPE[0], "width": IMAGE_SHAPE[1], "channels": IMAGE_SHAPE[2]}}


def mnist_dataset(pattern: str, batch_size: int, *, mode: str = "train", seed: int = 0, cache: bool = True,
                  shuffle_buffer: int = 1024, as_dict: bool = True, autotune: bool | None = None):
    """The hand-written pipeline every configuration shares: files -> cache (raw records) ->
    shuffle -> repeat (train) -> batch -> ONE vectorised parse_example per batch -> decode ->
    prefetch (2 parallel parses, 2 batches ahead; `autotune`: AUTOTUNE both). `as_dict`:
    features as {"image": ...} (the Estimator's contract), else the bare tensor."""
    import tensorflow as tf

    train = mode == "train"
    files = sorted(tf.io.gfile.glob(pattern))
    ds = tf.data.TFRecordDataset(files)
    if cache:
        ds = ds.cache()
    if train:
        ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.batch(batch_size, drop_remainder=train)
    spec = {"image_raw": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}

    def parse(serialized):
        parsed = tf.io.parse_example(serialized, spec)
        images = tf.reshape(tf.io.decode_raw(parsed["image_raw"], tf.uint8), [-1, *IMAGE_SHAPE])
        images = tf.cast(images, tf.float32) * (1.0 / 255.0)
        labels = tf.cast(parsed["label"], tf.int32)
        return ({"image": images} if as_dict else images), labels

    # Fixed parallelism by default: with AUTOTUNE a configuration waiting for its turn
    # (common.run_gated) prefetches an autotuned, run-to-run varying number of batches ahead,
    # which made loop times bimodal; the steady state is the same either way on 2 cores
    # (benchmarks/README.md). TPUE_BENCH_AUTOTUNE=1 switches AUTOTUNE back on.
    if autotune is None:
        autotune = os.environ.get("TPUE_BENCH_AUTOTUNE", "0") == "1"
    ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE if autotune else 2)
    return ds.prefetch(tf.data.AUTOTUNE if autotune else 2)


def model_params(workload: str, **extra) -> dict:
    params = {"num_classes": NUM_CLASSES, "feature_spec": {"image": (IMAGE_SHAPE, "float32")},
              "learning_rate": 0.001}
    params.update(extra)
    return params


def model_fn_for(workload: str) -> Callable[[dict], Any]:
    """The tpuestimator model function of a workload: `linear` (784 -> 10) or `cnn` (the MNIST CNN;
    in smoke runs narrower, SMOKE_MODEL_PARAMS)."""
    setup_path()
    if workload == "linear":
        from tpuestimator.models.tabular import linear

        return linear
    if workload == "cnn":
        from tpuestimator.models.cnn import cnn

        if not _smoke_models:
            return cnn

        def smoke_cnn(params: dict):
            return cnn({**SMOKE_MODEL_PARAMS["cnn"], **params})

        return smoke_cnn
    raise ValueError(f"unknown workload {workload!r}: 'linear' or 'cnn'")


def build_model(workload: str, seed: int = 42):
    """(keras model, optimizer, per-example loss) from the workload's model function, for the
    bare and Keras configurations (the Estimator calls the same model function itself)."""
    import keras

    keras.utils.set_random_seed(seed)
    spec = model_fn_for(workload)(model_params(workload))
    if not spec.model.built:
        spec.model.build((None, *IMAGE_SHAPE))
    return spec.model, spec.optimizer, spec.loss


def temp_dir(prefix: str) -> str:
    """A fresh temporary folder, removed when the process exits (TPUE_BENCH_KEEP=1 keeps it)."""
    path = tempfile.mkdtemp(prefix=f"tpue-bench-{prefix}-")
    if os.environ.get("TPUE_BENCH_KEEP") != "1":
        import atexit
        import shutil

        atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path
