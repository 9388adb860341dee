"""Training-loop throughput: a bare TF2 loop vs Keras `fit` vs tpuestimator's Estimator.

Same workload, same data, same process, interleaved repeats:

- `bare`: one `tf.function` over `tf.range(100)` calling the train step with
  `next(iterator)` and `optimizer.apply_gradients` (nothing else);
- `keras`: Keras 3 `model.fit(steps_per_execution=100)`;
- `estimator`: `tpuestimator.Estimator.train` as `tpuestimator train` runs it: LoggingHook
  + SummaryHook (job.py's defaults), NaN sentinel on, iterations_per_loop=100;
- `estimator_nohooks` (linear only, diagnostic): no hooks, sentinel off;
- `estimator_pipeline` (linear only, informational): the Estimator reading the records
  through tpuestimator's own `data.make_input_fn` (cache: true) instead of the shared pipeline.

Workloads: `linear` (784 -> 10: loop overhead dominates) and `cnn` (seed 002's MNIST CNN),
10k random records in seed 002's format, cached, batch 128. Steps/s is measured after
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
# loops per repeat: (warm-up loops not timed, timed loops). The cnn runs ~20 steps/s on two
# shared cores (5 s per 100-step loop), so it times from the first loop's start instead.
PLAN = {"linear": (1, 3), "cnn": (0, 1)}
SMOKE_PLAN = {"linear": (1, 1), "cnn": (0, 1)}
REPEATS = {"linear": 15, "cnn": 5}


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

    def run(self, warmup: int, loops: int) -> float:
        import tensorflow as tf

        marks = common.Marks()
        for _ in range(warmup + loops):
            marks.begin()
            float(self.loop(self.iterator, tf.constant(self.steps_per_loop, tf.int64)))
            marks.end()
        return marks.measures(warmup, self.steps_per_loop)


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

    def run(self, warmup: int, loops: int) -> float:
        import keras

        marks = common.Marks()

        class Mark(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                marks.begin()

            def on_train_batch_end(self, batch, logs=None):
                float(logs["loss"])
                marks.end()

        self.model.fit(self.dataset, epochs=1, steps_per_epoch=(warmup + loops) * self.steps_per_loop,
                       verbose=0, callbacks=[Mark()])
        return marks.measures(warmup, self.steps_per_loop)


class EstimatorTrain:
    """tpuestimator's Estimator with job.py's default hooks (LoggingHook + SummaryHook)."""

    def __init__(self, workload, pattern, batch, *, precision="float32", jit_compile=False, steps_per_loop=100,
                 hooks=True, nan_sentinel=True, pipeline="shared", save_checkpoints_steps=None,
                 async_checkpoint=False, model_dir=None, log_file=None):
        from tpuestimator.estimator import Estimator, RunConfig
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

    def run(self, warmup: int, loops: int) -> float:
        from tpuestimator.hooks.base import Hook

        marks = common.Marks()

        class Mark(Hook):
            def before_loop(self, step):
                marks.begin()

            def after_loop(self, step, logs):
                marks.end()

        self.estimator.train(self.input_fn, steps=(warmup + loops) * self.steps_per_loop,
                             hooks=[*self.hooks, Mark()], save_final_checkpoint=False)
        return marks.measures(warmup, self.steps_per_loop)


def configure_logging(path: str) -> None:
    """The tpuestimator log goes to a file at INFO, as `tpuestimator train` records output.log."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("tpuestimator")
    root.addHandler(handler)
    root.setLevel(logging.INFO)


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
    raise ValueError(f"unknown config {config!r}")


DEFAULT_CONFIGS = {"linear": ["bare", "keras", "estimator", "estimator_nohooks", "estimator_pipeline"],
                   "cnn": ["bare", "keras", "estimator"]}


METRICS = ("steps_per_sec", "steps_per_sec_loop_median", "cpu_ms_per_100_steps")


def ratio_set(a: list[dict], b: list[dict]) -> dict:
    """a relative to b, per repeat, three ways (all: higher is better for a)."""
    return {
        "steps_per_sec": common.paired_ratio([x["steps_per_sec"] for x in a], [y["steps_per_sec"] for y in b]),
        "loop_median": common.paired_ratio([x["steps_per_sec_loop_median"] for x in a],
                                           [y["steps_per_sec_loop_median"] for y in b]),
        "cpu_efficiency": common.paired_ratio([y["cpu_ms_per_100_steps"] for y in b],
                                              [x["cpu_ms_per_100_steps"] for x in a]),
    }


def bench_workload(workload: str, configs, pattern: str, *, batch: int, repeats: int, plan, precision: str,
                   jit_compile: bool, log) -> dict:
    warmup, loops = plan
    runners, build_s, first_s = {}, {}, {}
    for name in configs:
        t0 = time.perf_counter()
        runners[name] = make_runner(name, workload, pattern, batch, precision=precision, jit_compile=jit_compile)
        build_s[name] = time.perf_counter() - t0
        t0 = time.perf_counter()
        runners[name].run(0, 1)  # traces; not timed
        first_s[name] = time.perf_counter() - t0
        log(f"  {workload}/{name}: built in {build_s[name]:.1f}s, traced + first loop in {first_s[name]:.1f}s")
    raw = common.interleave({n: (lambda r=r: r.run(warmup, loops)) for n, r in runners.items()}, repeats)
    out = {"configs": {n: {**{m: common.summarize([x[m] for x in v]) for m in METRICS},
                           "build_s": build_s[n], "trace_and_first_loop_s": first_s[n]}
                       for n, v in raw.items()},
           "plan": {"warmup_loops": warmup, "timed_loops": loops, "steps_per_loop": common.STEPS_PER_LOOP,
                    "batch_size": batch, "repeats": repeats, "precision": precision, "jit_compile": jit_compile}}
    if "keras" in runners:
        out["keras_jit_compile"] = bool(getattr(runners["keras"].model, "jit_compile", False))
    pairs = [("estimator", o) for o in configs if o != "estimator" and o in ("bare", "keras")]
    pairs += [(o, "bare") for o in configs if o.startswith("estimator_") and "bare" in configs]
    out["ratios"] = {f"{a}/{b}": ratio_set(raw[a], raw[b]) for a, b in pairs if a in raw and b in raw}
    return out


def main(argv=None) -> int:
    def extra(p):
        p.add_argument("--workloads", default="linear,cnn")
        p.add_argument("--configs", default=None, help="comma-separated (default: all for the workload)")
        p.add_argument("--precision", default="float32", choices=["float32", "mixed_bfloat16", "mixed_float16"])
        p.add_argument("--jit-compile", action="store_true")
        p.add_argument("--records", type=int, default=None, help="random records to generate (default 10000)")
        p.add_argument("--batch-size", type=int, default=128)
        p.add_argument("--name", default="loop", help="result file name (<out>/<name>.json)")
        p.add_argument("--plan", default=None, help="override loops per repeat: 'WARMUP,TIMED'")

    args = common.standard_args(__doc__.splitlines()[0], argv, extra, default_repeats=None)
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    workdir = common.temp_dir("loop")
    configure_logging(os.path.join(workdir, "tpuestimator.log"))
    records = args.records or (512 if args.smoke else 10_000)
    pattern = common.write_mnist_records(os.path.join(workdir, "data"), records)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    results, ratios, targets = {}, {}, {}
    for workload in args.workloads.split(","):
        configs = args.configs.split(",") if args.configs else DEFAULT_CONFIGS[workload]
        plan = (SMOKE_PLAN if args.smoke else PLAN)[workload]
        if args.plan:
            plan = tuple(int(x) for x in args.plan.split(","))
        repeats = args.repeats or (2 if args.smoke else REPEATS[workload])
        log(f"{workload}: {configs}, plan {plan}, {repeats} repeats")
        res = bench_workload(workload, configs, pattern, batch=args.batch_size, repeats=repeats, plan=plan,
                             precision=args.precision, jit_compile=args.jit_compile, log=log)
        results[workload] = res
        for key, sets in res["ratios"].items():
            target = TARGETS.get((workload, key)) if args.precision == "float32" and not args.jit_compile else None
            ratios[f"{workload}:{key}"] = common.check_target(sets["steps_per_sec"], target) if target \
                else sets["steps_per_sec"]
            if target:
                targets[f"{workload}:{key}"] = target
        for name, c in res["configs"].items():
            s, m, cpu = c["steps_per_sec"], c["steps_per_sec_loop_median"], c["cpu_ms_per_100_steps"]
            log(f"  {workload}/{name}: {s['median']:.1f} steps/s (spread {s['spread']:.0%}); loop-median "
                f"{m['median']:.1f}; cpu {cpu['median']:.1f} ms/100 steps")
        for key, sets in res["ratios"].items():
            log(f"  {workload} {key} = {common.fmt_ratio(sets['steps_per_sec'])}  loop-median "
                f"{common.fmt_ratio(sets['loop_median'])}  cpu-efficiency {common.fmt_ratio(sets['cpu_efficiency'])}")
    path = common.write_results(args.name, args.out, smoke=args.smoke, args=vars(args), results=results,
                                ratios=ratios, targets=targets,
                                notes=["steps/s after warm-up between host loop-boundary marks; ratios are per "
                                       "interleaved repeat: median [min-max]"])
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
