"""Fashion-MNIST, three peers on the same records (issue 31, item 3): tpuestimator, Keras 3
`fit`, and a TF1 TPUEstimator program under TensorFlow 2.15.

The records are the `fashion_mnist` example's (`tpuestimator example fashion_mnist --out DIR`:
the dataset's 60,000 training images in train.tfrecord, its 10,000 test images in
eval.tfrecord, from Debian's `dataset-fashion-mnist`), and so is the model: the example's
config (model `cnn`, Adam, learning rate 0.001, batch 128, 100 iterations per loop). Peers:

- `tpuestimator`: the Estimator built from the example's config (`build_estimator`, the config's
  input functions), `train(steps=K)` then `evaluate()` over every test image, in one process.
- `tpuestimator_bf16`: the same, under `run.precision: mixed_bfloat16` (Keras's policy: bfloat16
  compute, float32 variables); goals: at least 1.5x the float32 peer's step in CPU per step, test
  accuracy within 0.5 points of it (issue 31, item 3).
- `keras`: Keras 3 `fit` on the same network (the `cnn` model function's Keras model, its Adam),
  `steps_per_execution` = iterations per loop, `validation_data` = every test image, one
  epoch of K steps per segment; the records read by a hand-written tf.data pipeline
  (cache -> shuffle with the config's buffer -> batch -> parse_example -> scale by 1/255).
- `tf1`: benchmarks/fashion_mnist_tf1.py (a model_fn with `tf.compat.v1.layers`,
  `TPUEstimatorSpec`, a `metric_fn`, `TPUEstimator(use_tpu=False)`) under a TensorFlow 2.15
  interpreter in a scratch venv outside the repository (`--tf215-python`, default
  /tmp/tf215venv/bin/python, as bench_tables_speed.py; created there with
  `python3.11 -m venv` and `pip install 'tensorflow-cpu==2.15.*'` when absent).

Each peer is its own child process, driven segment by segment: in each round every peer trains
K steps (`--eval-every`) and evaluates over every test image, one peer at a time, in an order
rotating each round, so all see the same load. Per peer: test accuracy after the last
segment; steps/s in the steady loop (a segment's loops after its first, which holds the TF1
program's graph building and checkpoint restore); and time to 88% test accuracy: the wall time of
the segments (training and evaluation) up to the first evaluation at or above 0.88, with the
step it came at. Ratios tpuestimator/tf1 and tpuestimator/keras of steps/s are paired by
round (the first round, with tracing, left out).

Also: FLOPs per training step from the model's layers (convolutions and dense layers, 2 per
multiply-add, the backward pass twice the forward) and the fraction of the CPU's float32 peak
the steady loop reaches (peak = cores x float32 lanes of the widest vector unit /proc/cpuinfo
reports x 2 for FMA x 2 FMA units per core (assumed: server cores since Skylake-SP have two;
not readable from /proc/cpuinfo) x the clock lscpu reports (max MHz, else the model name's GHz)).

    nice -n 10 .venv/bin/python benchmarks/bench_fashion_mnist.py [--smoke] [--steps 3000]
        [--eval-every 500] [--peers tpuestimator,tpuestimator_bf16,keras,tf1] [--tf215-python PATH] [--out DIR]
        [--md FILE]

Writes `<out>/fashion_mnist.json`, and `benchmarks/fashion_mnist_results.md` (`--md FILE`: there
instead; not in smoke runs; `--render JSON` rewrites it from a JSON file the script wrote, running nothing),
and, when the TF1 peer ran, docs/MIGRATING.md's table (between its `fashion-mnist-table` markers),
with the nearest-class-mean accuracy on the raw pixels computed here for context.
`--smoke`: 600 training and 100 test images, 2 segments of 10 steps (loops of 5), batch 16, peers tpuestimator,
tpuestimator_bf16 and keras (the TF1 peer needs the TF 2.15 venv, which only a full run creates), each in a thread
of this process instead of a child process (same protocol).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402

TF1_SCRIPT = HERE / "fashion_mnist_tf1.py"
DEFAULT_TF215 = "/tmp/tf215venv/bin/python"
RESULTS_MD = HERE / "fashion_mnist_results.md"
ACCURACY_BAR = 0.88
# goals of issue 31, item 3
ACCURACY_POINTS = 0.5          # |tpuestimator - tf1| test accuracy, points
TARGETS = {"tpuestimator/tf1": 1.3, "tpuestimator/keras": 1.1}   # steps/s
TIME_TO_BAR_TARGET = 0.7       # tpuestimator / tf1 time to 88%, at most
PEERS = ("tpuestimator", "tpuestimator_bf16", "keras", "tf1")
# `tpuestimator_bf16`: the same Estimator under `run.precision: mixed_bfloat16` (issue 31, item 3: at least
# 1.5x the float32 step, CPU per step, at test accuracy within 0.5 points)
PRECISION = {"tpuestimator_bf16": "mixed_bfloat16"}
BF16_SPEEDUP = 1.5
# docs/MIGRATING.md's table is this script's (issue 31, item 4): between these markers, rewritten by
# every full run with the TF1 peer and by `--render`
MIGRATING_MD = common.REPO / "docs" / "MIGRATING.md"
MIGRATING_BEGIN = "<!-- fashion-mnist-table:begin (benchmarks/bench_fashion_mnist.py writes this block) -->"
MIGRATING_END = "<!-- fashion-mnist-table:end -->"
# Context rows, not rerun: the submitted, untested results the dataset's README lists
# (/usr/share/doc/dataset-fashion-mnist/README.md.gz, its "Benchmark" tables)
PUBLISHED = (("2 Conv+pooling (TensorFlow's layers tutorial)", 0.916),
             ("2 Conv+pooling (Kashif Rasul)", 0.876),
             ("Human performance (1,000 test images, no fashion expertise)", 0.835))


# ---------------------------------------------------------------------------- the children
def _child_ours(spec: dict):
    """(segment function) of the tpuestimator peer."""
    from tpuestimator.config import load_config
    from tpuestimator.hooks import Hook
    from tpuestimator.jobs.from_config import build_estimator, input_fn_for

    cfg = load_config(spec["config"], [f"train.batch_size={spec['batch_size']}",
                                       f"params.learning_rate={spec['learning_rate']}",
                                       f"train.iterations_per_loop={spec['steps_per_loop']}",
                                       f"run.precision={spec.get('precision', 'float32')}"])
    estimator = build_estimator(cfg, model_dir=spec["model_dir"])
    train_fn, eval_fn = input_fn_for(cfg, "train"), input_fn_for(cfg, "eval")

    class LoopClock(Hook):
        def __init__(self):
            self.stamps = []

        def after_loop(self, step, logs):
            self.stamps.append(time.perf_counter())

    def segment():
        clock = LoopClock()
        t0, c0 = time.perf_counter(), time.process_time()
        estimator.train(train_fn, steps=spec["segment_steps"], hooks=[clock], save_final_checkpoint=False)
        t1, c1 = time.perf_counter(), time.process_time()
        result = estimator.evaluate(eval_fn)
        compute_dtype = next(layer for layer in estimator.model.layers if layer.weights).compute_dtype
        return {"step": int(result["global_step"]), "compute_dtype": compute_dtype,
                "train_wall": t1 - t0, "train_cpu": c1 - c0,
                "steady_wall": clock.stamps[-1] - clock.stamps[0] if len(clock.stamps) > 1 else None,
                "steady_steps": (len(clock.stamps) - 1) * spec["steps_per_loop"],
                "eval_wall": time.perf_counter() - t1, "accuracy": float(result["accuracy"]),
                "eval_examples": int(result.get("num_examples", 0))}
    return segment


def _child_keras(spec: dict, out, stdin, stop):
    """Runs the Keras peer: one `fit` of one K-step epoch per segment, gated at each epoch's start;
    `stop()` ends it when the conductor says STOP."""
    import keras

    common.setup_path()
    from tpuestimator.models.cnn import cnn

    keras.utils.set_random_seed(spec.get("seed", 0))
    model_spec = cnn({"num_classes": 10, "learning_rate": spec["learning_rate"],
                      "feature_spec": {"image": ((28, 28, 1), "float32")}})
    model = model_spec.model
    model.compile(optimizer=keras.optimizers.Adam(spec["learning_rate"]),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], steps_per_execution=spec["steps_per_loop"])
    train = common.mnist_dataset(spec["train_files"], spec["batch_size"], mode="train", seed=spec.get("seed", 0),
                                 shuffle_buffer=spec["shuffle_buffer"], as_dict=False)
    test = common.mnist_dataset(spec["eval_files"], spec["eval_batch_size"], mode="eval", as_dict=False)
    loop = spec["steps_per_loop"]

    class Gate(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            line = stdin.readline().strip()
            if line != "GO":
                out.flush()
                stop()
            self.stamps, self.t0, self.c0 = [], time.perf_counter(), time.process_time()

        def on_train_batch_end(self, batch, logs=None):
            float(logs["loss"])  # read back each loop, as a progress bar would
            self.stamps.append(time.perf_counter())

        def on_test_begin(self, logs=None):
            self.t1, self.c1 = time.perf_counter(), time.process_time()

        def on_epoch_end(self, epoch, logs=None):
            t2 = time.perf_counter()
            out.write("SEGMENT " + json.dumps({
                "step": (epoch + 1) * spec["segment_steps"], "train_wall": self.t1 - self.t0,
                "train_cpu": self.c1 - self.c0,
                "steady_wall": self.stamps[-1] - self.stamps[0] if len(self.stamps) > 1 else None,
                "steady_steps": (len(self.stamps) - 1) * loop, "eval_wall": t2 - self.t1,
                "accuracy": float(logs["val_accuracy"])}) + "\n")
            out.flush()

    out.write("READY\n")
    out.flush()
    model.fit(train, epochs=10**6, steps_per_epoch=spec["segment_steps"], validation_data=test, verbose=0,
              callbacks=[Gate()])


def child_main(side: str, spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    out, stdin = sys.stdout, sys.stdin
    sys.stdout = sys.stderr  # the protocol owns stdout
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.getLogger("tpuestimator").setLevel(logging.WARNING)
    serve(side, spec, out, stdin, stop=lambda: os._exit(0))  # STOP: nothing to save
    return 0


def serve(side: str, spec: dict, out, stdin, stop) -> None:
    """A peer's side of the protocol: READY, then a SEGMENT line per GO, until STOP."""
    if side == "keras":
        _child_keras(spec, out, stdin, stop)
        return
    segment = _child_ours(spec)
    out.write("READY\n")
    out.flush()
    for line in stdin:
        if line.strip() != "GO":
            break
        out.write("SEGMENT " + json.dumps(segment()) + "\n")
        out.flush()


class Peer:
    """One peer's child process, driven segment by segment (READY, then GO -> SEGMENT <json>)."""

    def __init__(self, name: str, argv: list[str], work: Path, env: dict):
        self.name = name
        self.stderr_path = work / f"{name}.stderr"
        self._err = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                                     text=True, env=env)
        self._to, self._from = self.proc.stdin, self.proc.stdout
        self.segments: list[dict] = []
        self._expect("READY")

    def _ended(self) -> tuple[str, str]:  # (what happened, its output)
        return f"the child ended (exit {self.proc.poll()})", self.stderr_path.read_text()[-3000:]

    def _expect(self, word: str) -> str:
        line = self._from.readline()
        if not line.startswith(word):
            what, detail = self._ended()
            raise RuntimeError(f"{self.name}: {what} instead of printing {word}: {detail}")
        return line[len(word):].strip()

    def segment(self, round_index: int) -> dict:
        self._to.write("GO\n")
        self._to.flush()
        seg = json.loads(self._expect("SEGMENT"))
        seg["round"] = round_index
        self.segments.append(seg)
        return seg

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self._to.write("STOP\n")
                self._to.flush()
                self.proc.wait(60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
        self._err.close()


class _Stopped(Exception):
    """The conductor said STOP to a peer running in a thread."""


class ThreadPeer(Peer):
    """A peer in a thread of this process, over the same line protocol (smoke runs: a child
    process's TensorFlow start-up, ~8 CPU s a peer, measures nothing there)."""

    def __init__(self, name: str, spec: dict):
        self.name, self.segments, self.error = name, [], ""
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        self._to, self._from = os.fdopen(down_w, "w"), os.fdopen(up_r)
        child_in, child_out = os.fdopen(down_r), os.fdopen(up_w, "w")

        def stop():
            raise _Stopped

        def run():
            try:
                serve(name, spec, child_out, child_in, stop)
            except _Stopped:
                pass
            except BaseException:  # reported by the conductor, which reads the end of the stream
                self.error = traceback.format_exc()
            finally:
                child_out.close()
                child_in.close()

        self.thread = threading.Thread(target=run, name=f"peer-{name}", daemon=True)
        self.thread.start()
        self._expect("READY")

    def _ended(self) -> tuple[str, str]:  # (what happened, its output)
        return "the peer's thread ended", self.error[-3000:]

    def close(self) -> None:
        if self.thread.is_alive():
            try:
                self._to.write("STOP\n")
                self._to.flush()
            except OSError:
                pass
            self.thread.join(60)
        self._to.close()
        self._from.close()


# ---------------------------------------------------------------------------- TF 2.15
def tf215_version(python: str) -> str | None:
    """The interpreter's TensorFlow version when it has TPUEstimator (TensorFlow 2.15), else None."""
    if not python or not os.path.exists(python):
        return None
    proc = subprocess.run([python, "-c", "import tensorflow as tf; tf.compat.v1.estimator.tpu.TPUEstimator; "
                                         "print(tf.__version__)"], capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=""))
    return proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 and proc.stdout.strip() else None


def ensure_tf215(python: str) -> str:
    """Creates the TF 2.15 scratch venv `python` belongs to when it lacks TPUEstimator; returns its version."""
    version = tf215_version(python)
    if version:
        return version
    venv = Path(python).parent.parent
    print(f"creating the TensorFlow 2.15 venv {venv} (python3.11 -m venv; pip install 'tensorflow-cpu==2.15.*')",
          flush=True)
    subprocess.run(["python3.11", "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "tensorflow-cpu==2.15.*"], check=True)
    version = tf215_version(python)
    if not version:
        raise RuntimeError(f"{python}: TensorFlow 2.15 installed but tf.compat.v1.estimator.tpu does not import")
    return version


# ---------------------------------------------------------------------------- FLOPs and peak
def flops_per_step(batch: int) -> dict:
    """Multiply-adds of the `cnn` model's layers, read from its Keras layers: forward FLOPs per
    image (2 per multiply-add), training = 3x forward (the backward pass computes the input and
    the weight gradients, each as costly as the forward), per step = x batch."""
    import keras

    common.setup_path()
    from tpuestimator.models.cnn import cnn

    model = cnn({"num_classes": 10, "feature_spec": {"image": ((28, 28, 1), "float32")}}).model
    forward = 0
    for layer in model.layers:
        if isinstance(layer, keras.layers.Conv2D):
            _, h, w, c_out = layer.output.shape
            kh, kw, c_in, _ = layer.kernel.shape
            forward += 2 * h * w * c_out * kh * kw * c_in
        elif isinstance(layer, keras.layers.Dense):
            c_in, c_out = layer.kernel.shape
            forward += 2 * c_in * c_out
    return {"forward_flops_per_image": int(forward), "train_flops_per_step": int(3 * forward * batch)}


def cpu_peak() -> dict:
    """float32 peak FLOP/s from /proc/cpuinfo and lscpu (see the module docstring)."""
    info: dict = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
        flags = set(re.search(r"^flags\s*:(.*)$", text, re.M).group(1).split())
    except (OSError, AttributeError):
        flags = set()
    lanes = 16 if "avx512f" in flags else 8 if "avx2" in flags or "avx" in flags else 4
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    fields = {}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        fields = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in out.splitlines() if ":" in line)}
    except (OSError, subprocess.SubprocessError):
        pass
    ghz, source = None, None
    if fields.get("CPU max MHz"):
        ghz, source = float(fields["CPU max MHz"]) / 1000, "lscpu CPU max MHz"
    elif re.search(r"@\s*([\d.]+)GHz", fields.get("Model name", "")):
        ghz, source = float(re.search(r"@\s*([\d.]+)GHz", fields["Model name"]).group(1)), "the model name's GHz"
    elif re.search(r"^cpu MHz\s*:\s*([\d.]+)", text if flags else "", re.M):
        ghz, source = float(re.search(r"^cpu MHz\s*:\s*([\d.]+)", text, re.M).group(1)) / 1000, "/proc/cpuinfo cpu MHz"
    fma_units = 2
    info.update(cores=cores, float32_lanes=lanes, fma="fma" in flags, fma_units_per_core_assumed=fma_units,
                ghz=ghz, clock_from=source, avx512_bf16="avx512_bf16" in flags, amx_bf16="amx_bf16" in flags,
                cpu_model=fields.get("Model name"))
    info["peak_flops"] = cores * lanes * (2 if "fma" in flags else 1) * fma_units * ghz * 1e9 if ghz else None
    return info


# ---------------------------------------------------------------------------- the conductor
def prepare_data(work: Path, limit: int | None) -> dict:
    common.setup_path()
    from tpuestimator.config import load_config
    from tpuestimator.data import resolve_section
    from tpuestimator.examples import fashion_mnist

    config = fashion_mnist.write(work / "fashion_mnist", limit=limit)
    cfg = load_config(config)
    return {"config": config, "train_files": str(work / "fashion_mnist" / "train.tfrecord"),
            "eval_files": str(work / "fashion_mnist" / "eval.tfrecord"),
            "shuffle_buffer": int(resolve_section(cfg.data).shuffle_buffer),
            "eval_batch_size": int(cfg.eval.batch_size), "config_batch_size": int(cfg.train.batch_size),
            "learning_rate": float(cfg.params.get("learning_rate", 0.001)),
            "steps_per_loop": int(cfg.train.iterations_per_loop),
            "save_checkpoints_steps": int(cfg.train.save_checkpoints_steps),
            "train_images": 60000 if limit is None else int(limit),
            "test_images": 10000 if limit is None else -(-int(limit) // fashion_mnist.EVAL_SHARE)}


def time_to_bar(segments: list[dict]) -> dict:
    wall = 0.0
    for seg in segments:
        wall += seg["train_wall"] + seg["eval_wall"]
        if seg["accuracy"] >= ACCURACY_BAR:
            return {"seconds": wall, "step": seg["step"], "train_seconds": sum(
                s["train_wall"] for s in segments if s["step"] <= seg["step"])}
    return {"seconds": None, "step": None, "train_seconds": None}


def steady(seg: dict) -> float | None:
    return seg["steady_steps"] / seg["steady_wall"] if seg.get("steady_wall") else None


def run(args) -> dict:
    work = Path(common.temp_dir("fashion-mnist"))
    data = prepare_data(work, 600 if args.smoke else args.images)
    batch = args.batch or (common.SMOKE_BATCH_SIZE if args.smoke else data["config_batch_size"])
    loop = 5 if args.smoke else data["steps_per_loop"]   # smoke: two loops a segment, one timed
    segment_steps = args.eval_every or (10 if args.smoke else 500)
    steps = args.steps or (20 if args.smoke else 3000)
    if steps % segment_steps or segment_steps % loop:
        raise SystemExit(f"--steps ({steps}) must be a multiple of --eval-every ({segment_steps}), and that of the "
                         f"iterations per loop ({loop})")
    rounds = steps // segment_steps
    peers = [p for p in args.peers.split(",") if p]
    notes = []
    tf215 = None
    if "tf1" in peers:
        tf215 = ensure_tf215(args.tf215_python)
    spec = dict(data, batch_size=batch, steps_per_loop=loop, segment_steps=segment_steps, seed=0)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(common.REPO / "python"))
    machine = common.machine()
    children = {}
    try:
        for name in peers:   # one at a time: start-up is not measured
            peer_spec = dict(spec, model_dir=str(work / f"model-{name}"), precision=PRECISION.get(name, "float32"))
            spec_path = work / f"{name}.json"
            spec_path.write_text(json.dumps(peer_spec))
            if name == "tf1":
                argv, peer_env = [args.tf215_python, str(TF1_SCRIPT), str(spec_path)], dict(env, PYTHONPATH="")
            elif args.smoke:
                children[name] = ThreadPeer(name, peer_spec)
                continue
            else:
                argv, peer_env = [sys.executable, str(Path(__file__).resolve()), "--child", name, str(spec_path)], env
            children[name] = Peer(name, argv, work, peer_env)
        loads = []
        for r in range(rounds):
            k = r % len(peers)
            loads.append(os.getloadavg()[0])
            for name in peers[k:] + peers[:k]:
                seg = children[name].segment(r)
                print(f"  round {r + 1}/{rounds} {name:12s} step {seg['step']:5d}  test accuracy "
                      f"{seg['accuracy']:.4f}  steady {steady(seg) or float('nan'):.1f} steps/s  "
                      f"train {seg['train_wall']:.1f} s  eval {seg['eval_wall']:.1f} s", flush=True)
    finally:
        for child in children.values():
            child.close()

    per_peer = {}
    for name, child in children.items():
        segs = child.segments
        timed = segs[1:] if len(segs) > 1 else segs   # the first round: tracing, first fill of the cache
        per_peer[name] = {
            "accuracy": segs[-1]["accuracy"], "compute_dtype": segs[-1].get("compute_dtype", "float32"),
            "accuracy_by_step": {s["step"]: s["accuracy"] for s in segs},
            "steps_per_sec": common.summarize([steady(s) for s in timed]),
            "cpu_ms_per_step": common.summarize([1000 * s["train_cpu"] / segment_steps for s in timed]),
            "eval_seconds": common.summarize([s["eval_wall"] for s in segs]),
            "time_to_bar": time_to_bar(segs), "segments": segs}
    ratios = {}
    for other in ("tf1", "keras"):
        if "tpuestimator" in children and other in children:
            key = f"tpuestimator/{other}"
            pairs = [(steady(a), steady(b)) for a, b in zip(children["tpuestimator"].segments[1:] or
                                                            children["tpuestimator"].segments,
                                                            children[other].segments[1:] or children[other].segments)]
            ratios[key] = common.check_target(common.summarize([a / b for a, b in pairs if a and b]), TARGETS[key])
    goals = []
    if "tpuestimator" in per_peer and "tf1" in per_peer:
        diff = 100 * (per_peer["tpuestimator"]["accuracy"] - per_peer["tf1"]["accuracy"])
        goals.append({"goal": f"test accuracy within {ACCURACY_POINTS} points of the TF1 program",
                      "measured": f"{diff:+.2f} points", "met": abs(diff) <= ACCURACY_POINTS})
    for key, r in ratios.items():
        goals.append({"goal": f"steps/s {key} >= {r['target']}", "measured": f"{r['median']:.2f}" if r["median"] else "n/a",
                      "met": bool(r["met"])})
    if "tpuestimator" in per_peer and "tf1" in per_peer:
        a, b = per_peer["tpuestimator"]["time_to_bar"]["seconds"], per_peer["tf1"]["time_to_bar"]["seconds"]
        ratio = a / b if a and b else None
        goals.append({"goal": f"time to {ACCURACY_BAR:.0%} test accuracy tpuestimator/tf1 <= {TIME_TO_BAR_TARGET}",
                      "measured": f"{ratio:.2f}" if ratio else "n/a (a peer never reached it)",
                      "met": bool(ratio is not None and ratio <= TIME_TO_BAR_TARGET)})
    if "tpuestimator" in per_peer and "tpuestimator_bf16" in per_peer:
        goals += bf16_goals(per_peer["tpuestimator"], per_peer["tpuestimator_bf16"], children)
    flops = flops_per_step(batch)
    peak = cpu_peak()
    for res in per_peer.values():
        sps = res["steps_per_sec"]["median"]
        res["flops_per_sec"] = flops["train_flops_per_step"] * sps if sps else None
        res["fraction_of_peak"] = res["flops_per_sec"] / peak["peak_flops"] if sps and peak["peak_flops"] else None
        # per CPU second (one core's peak): what other users' load does not change
        cpu_ms = res["cpu_ms_per_step"]["median"]
        res["fraction_of_core_peak_per_cpu_s"] = (flops["train_flops_per_step"] / (cpu_ms / 1000) /
                                                  (peak["peak_flops"] / peak["cores"])
                                                  if cpu_ms and peak["peak_flops"] else None)
    if "tf1" not in peers:
        notes.append("tf1 not run (smoke runs leave out the TF 2.15 peer: its venv is created by a full run)"
                     if args.smoke else "tf1 not run: left out by --peers")
    notes.append(f"load average (1 min) at each round's start: {', '.join(f'{x:.1f}' for x in loads)}")
    results = {"workload": {"train_images": data["train_images"], "test_images": data["test_images"],
                            "batch": batch, "learning_rate": spec["learning_rate"], "steps": steps,
                            "eval_every": segment_steps, "steps_per_loop": loop, "shuffle_buffer": spec["shuffle_buffer"],
                            "tf215": tf215, "model": "cnn (conv 5x5 32, pool, conv 5x5 64, pool, dense 128, "
                                                      "dropout 0.4, 10 logits), Adam"},
               "peers": per_peer, "goals": goals, "flops": flops, "cpu_peak": peak, "loadavg_per_round": loads,
               "baselines": baselines(data["train_images"] if data["train_images"] < 60000 else None)}
    path = common.write_results("fashion_mnist", args.out, smoke=args.smoke,
                                args={**vars(args), "steps": steps, "eval_every": segment_steps}, results=results,
                                ratios=ratios, targets={**TARGETS, "accuracy_points": ACCURACY_POINTS,
                                                        "time_to_88_ratio": TIME_TO_BAR_TARGET},
                                notes=notes, machine_info=machine)
    written = json.loads(path.read_text())
    text = render(written)
    print(text)
    if not args.smoke:
        Path(args.md).write_text(text)
        print(f"wrote {args.md}")
        if "tf1" in per_peer:
            write_migrating_block(written)
    print(f"wrote {path}")
    return results


def nearest_class_mean(images_train, labels_train, images_test, labels_test) -> float:
    """Test accuracy of the nearest class mean on the raw pixels (squared Euclidean distance): the
    floor any learned model must clear."""
    import numpy as np

    x = images_train.reshape(len(images_train), -1)
    means = np.stack([x[labels_train == c].mean(axis=0, dtype=np.float64) for c in range(10)])
    t = images_test.reshape(len(images_test), -1).astype(np.float64)
    # |t - m|^2 = |t|^2 - 2 t.m + |m|^2; |t|^2 is the same for every class
    scores = -2 * t @ means.T + (means ** 2).sum(axis=1)
    return float((scores.argmin(axis=1) == labels_test).mean())


def baselines(limit: int | None = None) -> dict:
    """The nearest-class-mean accuracy on the dataset's own test images (all of them; the first
    `limit` training images when limited), from Debian's IDX files."""
    common.setup_path()
    from tpuestimator.data.idx import read_idx
    from tpuestimator.examples import fashion_mnist

    files = fashion_mnist.find_files()
    images, labels = (read_idx(files["train"][0], "images"), read_idx(files["train"][1], "labels"))
    if limit:
        images, labels = images[:limit], labels[:limit]
    test_images, test_labels = read_idx(files["eval"][0], "images"), read_idx(files["eval"][1], "labels")
    return {"nearest_class_mean": nearest_class_mean(images, labels, test_images, test_labels),
            "nearest_class_mean_train_images": int(len(images)), "nearest_class_mean_test_images": int(len(test_images))}


def migrating_block(d: dict) -> str:
    """docs/MIGRATING.md's Fashion-MNIST table, from a full run's JSON with the TF1 peer."""
    res, w, m = d["results"], d["results"]["workload"], d["machine"]
    peers, base = res["peers"], res["baselines"]
    names = {"tf1": "the TF1 program: TPUEstimator(use_tpu=False), `tf.compat.v1.layers`, TensorFlow "
                    f"{w.get('tf215')}",
             "tpuestimator": "tpuestimator: the `fashion_mnist` example's config",
             "tpuestimator_bf16": "tpuestimator, `run.precision: mixed_bfloat16`",
             "keras": f"Keras {m.get('keras')} `fit(steps_per_execution={w['steps_per_loop']})`"}
    lines = [MIGRATING_BEGIN, "",
             f"| program | test accuracy | steps/s | CPU ms / step | time to {ACCURACY_BAR:.0%} (s) |",
             "|---|---|---|---|---|"]
    for name in ("tf1", "tpuestimator", "tpuestimator_bf16", "keras"):
        if name not in peers:
            continue
        p, t = peers[name], peers[name]["time_to_bar"]
        bar = f"{t['seconds']:.0f} (step {t['step']})" if t.get("seconds") is not None else "not reached"
        lines.append(f"| {names[name]} | **{p['accuracy']:.4f}** | {p['steps_per_sec']['median']:.1f} | "
                     f"{p['cpu_ms_per_step']['median']:.0f} | {bar} |")
    lines.append(f"| nearest class mean on the raw pixels (computed by the benchmark) | {base['nearest_class_mean']:.4f} "
                 "| | | |")
    for label, accuracy in PUBLISHED:
        lines.append(f"| {label}: the dataset's README, not rerun | {accuracy:.3f} | | | |")
    loads = res["loadavg_per_round"]
    lines += ["", f"All {w['test_images']:,} test images; {w['train_images']:,} training images, batch {w['batch']}, "
              f"Adam at {w['learning_rate']}, {w['steps']:,} steps, {w['steps_per_loop']} steps per loop, the "
              f"programs taking turns every {w['eval_every']} steps on {m.get('usable_cpus')} CPU cores "
              f"(load average {min(loads):.1f}-{max(loads):.1f}; run of {d['created'][:10]}). Time to "
              f"{ACCURACY_BAR:.0%} is training plus evaluation up to the first evaluation at or above it. "
              "Details and the goals: benchmarks/fashion_mnist_results.md.", "", MIGRATING_END]
    return "\n".join(lines)


def write_migrating_block(d: dict, path: Path = MIGRATING_MD) -> None:
    """Replaces the block between the markers of docs/MIGRATING.md with `migrating_block(d)`."""
    text = path.read_text()
    start, end = text.index(MIGRATING_BEGIN), text.index(MIGRATING_END) + len(MIGRATING_END)
    path.write_text(text[:start] + migrating_block(d) + text[end:])
    print(f"wrote the Fashion-MNIST table of {path}")


def bf16_goals(f32: dict, bf16: dict, children: dict) -> list[dict]:
    """mixed_bfloat16 against float32: CPU per step (medians, what load distorts least), steps/s paired
    by round, and the test accuracy difference."""
    speedup = f32["cpu_ms_per_step"]["median"] / bf16["cpu_ms_per_step"]["median"]
    a, b = children["tpuestimator_bf16"].segments, children["tpuestimator"].segments
    paired = common.summarize([steady(x) / steady(y) for x, y in zip(a[1:] or a, b[1:] or b) if steady(x) and steady(y)])
    bf16["speedup_cpu_per_step"], bf16["speedup_steps_per_sec"] = speedup, paired
    diff = 100 * (bf16["accuracy"] - f32["accuracy"])
    return [{"goal": f"mixed_bfloat16 step at least {BF16_SPEEDUP}x the float32 step (CPU per step, medians)",
             "measured": f"{speedup:.2f}x ({f32['cpu_ms_per_step']['median']:.0f} / "
                         f"{bf16['cpu_ms_per_step']['median']:.0f} ms); steps/s paired by round "
                         f"{common.fmt_ratio(paired)}", "met": speedup >= BF16_SPEEDUP},
            {"goal": f"mixed_bfloat16 test accuracy within {ACCURACY_POINTS} points of float32",
             "measured": f"{diff:+.2f} points", "met": abs(diff) <= ACCURACY_POINTS}]


def render(d: dict) -> str:
    res, m, w = d["results"], d["machine"], d["results"]["workload"]
    peak = res["cpu_peak"]
    lines = ["# Fashion-MNIST: tpuestimator, Keras fit and the TF1 TPUEstimator program", "",
             "Written by `benchmarks/bench_fashion_mnist.py` (its docstring has the method) on "
             f"{d['created']}. Records: the `fashion_mnist` example's ({w['train_images']} training images; "
             f"evaluation over all {w['test_images']} test images). All peers: {w['model']}, batch {w['batch']}, "
             f"learning rate {w['learning_rate']}, {w['steps']} steps, {w['steps_per_loop']} steps per loop, "
             f"evaluated every {w['eval_every']} steps, one peer at a time in rotating order.", "",
             f"Machine: {m.get('cpu_model')}, {m.get('usable_cpus')} usable CPUs; TensorFlow {m.get('tensorflow')}, "
             f"Keras {m.get('keras')}; the TF1 program under TensorFlow {w.get('tf215') or '(not run)'}. "
             f"Load average (1 min) {m.get('loadavg_at_start', [0])[0]:.1f} at the start, "
             f"{m.get('loadavg_at_end', [0])[0]:.1f} at the end; per round: "
             f"{', '.join(f'{x:.1f}' for x in res['loadavg_per_round'])}.", ""]
    if d["smoke"]:
        lines += ["**Smoke run (tiny sizes): not measurements.**", ""]
    cpus = m.get("usable_cpus") or m.get("logical_cpus") or 1
    # the peers' own threads keep the load average near the core count: loaded means more than
    # one runnable thread beyond that (a quiet run read 1.8-2.2 on 2 CPUs)
    if max(res["loadavg_per_round"] or [0]) > cpus + 1:
        lines += [f"**The machine was loaded** (load average up to {max(res['loadavg_per_round']):.1f} on {cpus} "
                  "CPUs, from other users): the speed figures and ratios are noisy, each peer's share of the CPUs "
                  "varying from turn to turn; the accuracy figures do not depend on load.", ""]
    lines += ["| peer | test accuracy | steps/s (steady loop, median; range) | CPU ms / step | "
              f"time to {ACCURACY_BAR:.0%} (s, train + eval) | at step | fraction of float32 peak | "
              "the same per CPU second |",
              "|---|---|---|---|---|---|---|---|"]
    for name, p in res["peers"].items():
        s, t = p["steps_per_sec"], p["time_to_bar"]
        frac = f"{100 * p['fraction_of_peak']:.1f}%" if p.get("fraction_of_peak") else "n/a"
        per_cpu = p.get("fraction_of_core_peak_per_cpu_s")
        frac += f" | {100 * per_cpu:.0f}%" if per_cpu else " | n/a"
        when = f"{t['seconds']:.0f}" if t["seconds"] else "not reached"
        lines.append(f"| {name} | {p['accuracy']:.4f} | {s['median']:.1f} ({s['min']:.1f}-{s['max']:.1f}) | "
                     f"{p['cpu_ms_per_step']['median']:.0f} | "
                     f"{when} | {t['step'] or '-'} | {frac} |")
    lines += ["", "Test accuracy by step:", "", "| step | " + " | ".join(res["peers"]) + " |",
              "|---|" + "---|" * len(res["peers"])]
    steps = sorted({int(k) for p in res["peers"].values() for k in p["accuracy_by_step"]})
    for step in steps:
        lines.append(f"| {step} | " + " | ".join(
            f"{p['accuracy_by_step'].get(str(step), p['accuracy_by_step'].get(step, float('nan'))):.4f}"
            for p in res["peers"].values()) + " |")
    lines += ["", "## Goals (issue 31, item 3)", "", "| goal | measured | |", "|---|---|---|"]
    for g in res["goals"]:
        lines.append(f"| {g['goal']} | {g['measured']} | {'met' if g['met'] else 'MISSED'} |")
    for key, r in d["ratios"].items():
        lines.append(f"| steps/s {key}, paired by round | {common.fmt_ratio(r)} | |")
    peers = res["peers"]
    for other in ("tf1", "keras"):   # CPU seconds per step: what load distorts less than wall time
        if "tpuestimator" in peers and other in peers:
            ours, theirs = (peers[n]["cpu_ms_per_step"]["median"] for n in ("tpuestimator", other))
            if ours and theirs:
                lines.append(f"| CPU per step, {other}/tpuestimator (medians; > 1: tpuestimator does less work) | "
                             f"{theirs / ours:.2f} ({theirs:.0f} / {ours:.0f} ms) | |")
    f = res["flops"]
    lines += ["", "## Fraction of the CPU's peak", "",
              f"FLOPs per training step: {f['train_flops_per_step'] / 1e9:.2f} GFLOP ({f['forward_flops_per_image'] / 1e6:.1f} "
              "MFLOP forward per image from the model's Conv2D and Dense layers, 2 per multiply-add; training "
              f"3x forward; x batch {w['batch']}).",
              f"float32 peak: {peak['cores']} cores x {peak['float32_lanes']} float32 lanes (widest vector unit in "
              f"/proc/cpuinfo's flags) x {2 if peak['fma'] else 1} (FMA) x {peak['fma_units_per_core_assumed']} FMA "
              f"units per core (assumed) x {peak['ghz']} GHz ({peak['clock_from']}) = "
              + (f"{peak['peak_flops'] / 1e9:.0f} GFLOP/s." if peak["peak_flops"] else "unknown (no clock).")
              + " The last column divides the FLOPs per step by the process CPU seconds per step and by one core's "
              "share of that peak: the fraction of the peak the CPU time spent reached, whatever the load.",
              f"AVX512_BF16: {peak['avx512_bf16']}; AMX-BF16: {peak['amx_bf16']}"
              + (" (mixed_bfloat16 not measured here: `--peers tpuestimator,tpuestimator_bf16` measures it)."
                 if "tpuestimator_bf16" not in res["peers"] else
                 ": the tpuestimator_bf16 row's fraction is of the float32 peak; AVX512_BF16's VDPBF16PS makes "
                 "two bfloat16 products per float32 lane, so its bfloat16 peak is twice that."),
              ""]
    if d["notes"]:
        lines += ["## Notes", ""] + [f"- {n}" for n in d["notes"]] + [""]
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        return child_main(argv[1], argv[2])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--out", default=str(common.RESULTS_DIR))
    parser.add_argument("--steps", type=int, default=None, help="training steps per peer (default 3000; smoke 20)")
    parser.add_argument("--eval-every", type=int, default=None, help="steps per segment (default 500; smoke 10)")
    parser.add_argument("--batch", type=int, default=None, help="default the example config's (128; smoke 16)")
    parser.add_argument("--images", type=int, default=None, help="training images (default all 60,000)")
    parser.add_argument("--peers", default=None, help="default tpuestimator,tpuestimator_bf16,keras,tf1 (smoke: all but tf1); "
                        "tpuestimator_bf16: the Estimator under run.precision: mixed_bfloat16")
    parser.add_argument("--tf215-python", default=os.environ.get("TPUE_BENCH_TF215_PYTHON", DEFAULT_TF215))
    parser.add_argument("--repeats", type=int, default=None, help="accepted for run_all; one run of the rounds")
    parser.add_argument("--md", default=str(RESULTS_MD), help="the Markdown report (default fashion_mnist_results.md)")
    parser.add_argument("--render", metavar="JSON", default=None,
                        help="only rewrite fashion_mnist_results.md from a fashion_mnist.json this script wrote")
    args = parser.parse_args(argv)
    if args.render:
        d = json.loads(Path(args.render).read_text())
        Path(args.md).write_text(render(d))
        print(f"wrote {args.md}")
        if "tf1" in d["results"]["peers"] and not d["smoke"]:
            if "baselines" in d["results"]:
                write_migrating_block(d)
            else:  # --render runs nothing: the context row needs a run of this version
                print(f"docs/MIGRATING.md left as it is: {args.render} predates the nearest-class-mean baseline")
        return 0
    if args.peers is None:
        args.peers = "tpuestimator,tpuestimator_bf16,keras" if args.smoke else ",".join(PEERS)
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
