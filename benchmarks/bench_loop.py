"""Training-loop throughput: a bare TF2 loop vs Keras `fit` vs tpuestimator's Estimator.

Same workload, same data, same process, interleaved repeats:

- `bare`: one `tf.function` over `tf.range(100)` calling the train step with
  `next(iterator)` and `optimizer.apply_gradients` (nothing else);
- `keras`: Keras 3 `model.fit(steps_per_execution=100)`;
- `estimator`: `tpuestimator.Estimator.train` as `tpuestimator train` runs it: LoggingHook
  + SummaryHook (job.py's defaults), NaN sentinel on, iterations_per_loop=100;
- `estimator_nohooks` (linear only, diagnostic): no hooks, sentinel off;
- `estimator_pipeline` (on request only: `--configs`): the Estimator reading the records
  through tpuestimator's own `data.make_input_fn` (cache: true). Its AUTOTUNE prefetch runs
  ahead while other configurations have their turn, which flatters it and charges its
  parsing to them: compare pipelines with bench_input.py instead;
- `estimator_distributed_input` (linear only, diagnostic): the Estimator fed through the
  strategy's distributed iterator, as before the host-input fix (see README).

Workloads: `linear` (784 -> 10: loop overhead dominates) and `cnn` (TPUEstimator's MNIST CNN),
10k random records in the MNIST TFRecord format, cached, batch 128. Steps/s is measured after
warm-up (tracing excluded) between host-side loop-boundary marks; ratios are per repeat.

    .venv/bin/python benchmarks/bench_loop.py [--smoke] [--workloads linear,cnn]
        [--configs bare,keras,estimator] [--precision float32|mixed_bfloat16|mixed_float16]
        [--jit-compile] [--name loop]
"""
from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.setup_path()

TARGETS = {
    ("linear", "estimator/bare"): 0.90, ("cnn", "estimator/bare"): 0.97,
    ("linear", "estimator/keras"): 2.0, ("cnn", "estimator/keras"): 1.0,
}
# Rounds (after one warm-up round) and each configuration's turn per round: (settle, timed)
# 100-step loops. A waiting configuration's input pipeline runs ahead (prefetch), so its
# first loop after a wait is not steady state: `settle` loops drain it. The cnn runs ~20
# steps/s on two shared cores (5 s a loop): there the head start is negligible.
ROUNDS = {"linear": 20, "cnn": 6}
TURN = {"linear": (1, 3), "cnn": (0, 1)}


def _policy(precision: str):
    import keras

    keras.mixed_precision.set_global_policy(precision)


class BareTrain:
    """Nothing but a tf.function over tf.range(n) calling the step on next(iterator)."""

    def __init__(self, workload, pattern, batch, *, precision="float32", jit_compile=False, steps_per_loop=100):
        import keras
        import tensorflow as tf

        _policy(precision)
        try:
            model, optimizer, loss_fn = common.build_model(workload)
        finally:
            _policy("float32")
        if precision == "mixed_float16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        optimizer.build(model.trainable_variables)
        scaled = precision == "mixed_float16"
        self.iterator = iter(common.mnist_dataset(pattern, batch, as_dict=False))
        self.steps_per_loop = steps_per_loop

        def step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.cast(loss_fn(y, model(x, training=True)), tf.float32))
                target = optimizer.scale_loss(loss) if scaled else loss
            grads = tape.gradient(target, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        if jit_compile:
            step = tf.function(step, jit_compile=True)

        @tf.function
        def loop(iterator, n):
            loss = tf.constant(0.0)
            for _ in tf.range(n):
                x, y = next(iterator)
                loss = step(x, y)
            return loss

        self.loop = loop

    def __call__(self, gate: common.Gate) -> None:
        import tensorflow as tf

        n = tf.constant(self.steps_per_loop, tf.int64)
        while True:
            gate.boundary()
            float(self.loop(self.iterator, n))


class KerasFit:
    """Keras 3 `model.fit(steps_per_execution=100)` on the same model and data."""

    def __init__(self, workload, pattern, batch, *, precision="float32", jit_compile=False, steps_per_loop=100):
        import keras

        _policy(precision)
        try:
            model, optimizer, _ = common.build_model(workload)
            model.compile(optimizer=optimizer,
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          steps_per_execution=steps_per_loop, jit_compile=jit_compile)
        finally:
            _policy("float32")
        self.model = model
        self.dataset = common.mnist_dataset(pattern, batch, as_dict=False)
        self.steps_per_loop = steps_per_loop

    def __call__(self, gate: common.Gate) -> None:
        common.fit_gated(self.model, self.dataset, gate)


class EstimatorTrain:
    """tpuestimator's Estimator with job.py's default hooks (LoggingHook + SummaryHook)."""

    def __init__(self, workload, pattern, batch, *, precision="float32", jit_compile=False, steps_per_loop=100,
                 hooks=True, nan_sentinel=True, pipeline="shared", save_checkpoints_steps=None,
                 async_checkpoint=False, model_dir=None, log_file=None):
        from tpuestimator.core.estimator import Estimator, RunConfig
        from tpuestimator.hooks.builtin import LoggingHook, SummaryHook

        self.model_dir = model_dir or common.temp_dir("est")
        config = RunConfig(model_dir=self.model_dir, train_batch_size=batch, iterations_per_loop=steps_per_loop,
                           save_checkpoints_steps=save_checkpoints_steps, async_checkpoint=async_checkpoint,
                           precision=precision, jit_compile=jit_compile, nan_sentinel=nan_sentinel)
        self.estimator = Estimator(common.model_fn_for(workload), config,
                                   params={"num_classes": common.NUM_CLASSES, "learning_rate": 0.001})
        if pipeline == "shared":
            def input_fn(params):
                return common.mnist_dataset(pattern, params["batch_size"], seed=params["seed"])
            self.input_fn = input_fn
        else:
            from tpuestimator import data

            self.input_fn = data.make_input_fn(common.data_section(pattern), "train")
        self.hooks = [LoggingHook(1), SummaryHook(os.path.join(self.model_dir, "logs"))] if hooks else []
        self.steps_per_loop = steps_per_loop

    def __call__(self, gate: common.Gate) -> None:
        common.train_gated(self.estimator, self.input_fn, self.hooks, gate)


def configure_logging(path: str) -> None:
    """The tpuestimator log goes to a file at INFO, as `tpuestimator train` records output.log."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("tpuestimator")
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    root.propagate = False  # the file only, not the console


def make_runner(config: str, workload: str, pattern: str, batch: int, **kw):
    if config == "bare":
        return BareTrain(workload, pattern, batch, **kw)
    if config == "keras":
        return KerasFit(workload, pattern, batch, **kw)
    if config == "estimator":
        return EstimatorTrain(workload, pattern, batch, **kw)
    if config == "estimator_nohooks":
        return EstimatorTrain(workload, pattern, batch, hooks=False, nan_sentinel=False, **kw)
    if config == "estimator_pipeline":
        return EstimatorTrain(workload, pattern, batch, pipeline="tpuestimator", **kw)
    if config == "estimator_distributed_input":
        runner = EstimatorTrain(workload, pattern, batch, **kw)
        runner.estimator._input_on_host = lambda: False  # the strategy's distributed iterator (before the fix)
        return runner
    raise ValueError(f"unknown config {config!r}")


DEFAULT_CONFIGS = {"linear": ["bare", "keras", "estimator", "estimator_nohooks", "estimator_distributed_input"],
                   "cnn": ["bare", "keras", "estimator"]}
# --smoke: the targets' configurations only (the diagnostic ones are the Estimator with other flags),
# and Keras on linear only (the cnn's KerasFit is the same code on another model: a trace measuring nothing)
SMOKE_CONFIGS = {"linear": ["bare", "keras", "estimator"], "cnn": ["bare", "estimator"]}


def bench_workload(workload: str, configs, pattern: str, *, batch: int, rounds: int, precision: str,
                   jit_compile: bool, log, steps_per_loop: int = common.STEPS_PER_LOOP) -> dict:
    runners, build_s = {}, {}
    for name in configs:
        t0 = time.perf_counter()
        runners[name] = make_runner(name, workload, pattern, batch, precision=precision, jit_compile=jit_compile,
                                    steps_per_loop=steps_per_loop)
        build_s[name] = time.perf_counter() - t0
    t0 = time.perf_counter()
    turn = TURN[workload]
    loops = common.run_gated(runners, rounds=rounds, warmup=1, turn=turn, log=log)
    log(f"  {workload}: {rounds} rounds in {time.perf_counter() - t0:.0f}s")
    out = {"configs": {n: {**common.loop_stats(v, steps_per_loop), "build_s": build_s[n]} for n, v in loops.items()},
           "plan": {"rounds": rounds, "warmup_rounds": 1, "settle_loops_per_turn": turn[0],
                    "timed_loops_per_turn": turn[1], "steps_per_loop": steps_per_loop,
                    "batch_size": batch, "precision": precision, "jit_compile": jit_compile}}
    if "keras" in runners:
        out["keras_jit_compile"] = bool(getattr(runners["keras"].model, "jit_compile", False))
    pairs = [("estimator", o) for o in configs if o in ("bare", "keras") and "estimator" in configs]
    pairs += [(o, "bare") for o in configs if o.startswith("estimator_") and "bare" in configs]
    out["ratios"] = {f"{a}/{b}": common.loop_ratio(loops[a], loops[b]) for a, b in pairs}
    return out


def main(argv=None) -> int:
    def extra(p):
        p.add_argument("--workloads", default="linear,cnn")
        p.add_argument("--configs", default=None, help="comma-separated (default: all for the workload)")
        p.add_argument("--precision", default="float32", choices=["float32", "mixed_bfloat16", "mixed_float16"])
        p.add_argument("--jit-compile", action="store_true")
        p.add_argument("--variants", default=None,
                       help="several precision/XLA variants in one process, e.g. 'float32,float32+jit,"
                            "mixed_bfloat16+jit' (overrides --precision/--jit-compile)")
        p.add_argument("--records", type=int, default=None, help="random records to generate (default 10000)")
        common.add_batch_size_arg(p)
        p.add_argument("--name", default="loop", help="result file name (<out>/<name>.json)")
        p.add_argument("--steps-per-loop", type=int, default=None,
                       help="iterations_per_loop = steps_per_execution (default 100; smoke 10)")

    args = common.standard_args(__doc__.splitlines()[0], argv, extra, default_repeats=None)
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    workdir = common.temp_dir("loop")
    configure_logging(os.path.join(workdir, "tpuestimator.log"))
    records = args.records or (512 if args.smoke else 10_000)
    pattern = common.write_mnist_records(os.path.join(workdir, "data"), records)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    if args.variants:
        variants = []
        for v in args.variants.split(","):
            precision, _, jit = v.partition("+")
            if precision not in ("float32", "mixed_bfloat16", "mixed_float16") or jit not in ("", "jit"):
                raise SystemExit(f"--variants: {v!r} is not PRECISION or PRECISION+jit")
            variants.append((precision, jit == "jit"))
    else:
        variants = [(args.precision, args.jit_compile)]
    results, ratios, targets = {}, {}, {}
    machine_info = common.machine()
    path = None
    for precision, jit in variants:
        suffix = "" if len(variants) == 1 else f"@{precision}{'+jit' if jit else ''}"
        for workload in args.workloads.split(","):
            key_w = workload + suffix
            configs = args.configs.split(",") if args.configs else \
                [c for c in DEFAULT_CONFIGS[workload] if c in SMOKE_CONFIGS[workload] or not args.smoke]
            rounds = args.repeats or (2 if args.smoke else ROUNDS[workload])
            log(f"{key_w}: {configs}, {rounds} rounds")
            res = bench_workload(workload, configs, pattern, batch=args.batch_size, rounds=rounds,
                                 precision=precision, jit_compile=jit, log=log,
                                 steps_per_loop=args.steps_per_loop or (10 if args.smoke else common.STEPS_PER_LOOP))
            results[key_w] = res
            for key, sets in res["ratios"].items():
                target = TARGETS.get((workload, key)) if precision == "float32" and not jit else None
                ratios[f"{key_w}:{key}"] = common.check_target(sets["steps_per_sec"], target) if target \
                    else sets["steps_per_sec"]
                if target:
                    targets[f"{key_w}:{key}"] = target
            for name, c in res["configs"].items():
                log(f"  {key_w}/{name}: {c['steps_per_sec']['median']:.1f} steps/s per loop (IQR spread "
                    f"{c['steps_per_sec']['iqr_spread']:.0%}), overall {c['overall_steps_per_sec']:.1f}; "
                    f"cpu {c['cpu_ms_per_100_steps']['median']:.1f} ms/100 steps")
            for key, sets in res["ratios"].items():
                log(f"  {key_w} {key} = {common.fmt_ratio(sets['steps_per_sec'])}; overall {sets['overall']:.2f}; "
                    f"cpu-efficiency {common.fmt_ratio(sets['cpu_efficiency'])}")
            # Written after every workload/variant: a run cut short (a timeout) keeps what it measured.
            path = write(args, results, ratios, targets, machine_info)
    log(f"wrote {path}")
    return 0


def write(args, results, ratios, targets, machine_info):
    return common.write_results(args.name, args.out, smoke=args.smoke, args=vars(args), results=results,
                                ratios=ratios, targets=targets, machine_info=machine_info,
                                notes=["configurations take turns (common.run_gated): per round each runs `settle` "
                                       "untimed then `timed` loops back to back; a loop's time runs from one loop "
                                       "boundary to the next (host work included); ratios are per round: median, "
                                       "IQR, range; the first round (tracing) is not timed"])


if __name__ == "__main__":
    sys.exit(main())
