"""Evaluation and prediction throughput: tpuestimator's Estimator vs bare TF2 loops.

- eval: `Estimator.evaluate(input_fn)` (every example once; the last partial batch padded
  and masked) vs a bare `tf.function` looping over the dataset summing loss and correct
  predictions; Keras `model.evaluate` as a reference.
- predict: `list(Estimator.predict(input_fn))` (one dict per example, the default) and with
  `yield_single_examples=False` (one dict of arrays per batch) vs a bare loop calling a
  `tf.function` per batch and collecting numpy arrays.

All read the same records (the MNIST TFRecord format) with the same one-pass pipeline, batch 128,
built anew for every pass (as `Estimator.evaluate` calls its input_fn every time).
Each configuration runs one whole pass per repeat, interleaved; the first pass (tracing) is
not timed. The bare model carries the Estimator's weights, and the script checks both
compute the same accuracy (same work).

    .venv/bin/python benchmarks/bench_eval.py [--smoke] [--workloads linear,cnn]
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.setup_path()

RECORDS = {"linear": 10_000, "cnn": 2_000}
# issue 31 item 5: the cnn's evaluation and prediction against the bare loops (wall, median per repeat)
TARGETS = {("cnn", "eval/estimator/bare"): 0.97, ("cnn", "predict/estimator/bare"): 0.95}
REPEATS = {"linear": 9, "cnn": 5}


def build(workload: str, pattern: str, batch: int):
    """(estimator, input_fn, bare model, per-example loss) with the same weights."""
    import keras

    from tpuestimator.core.estimator import Estimator, RunConfig

    est = Estimator(common.model_fn_for(workload),
                    RunConfig(model_dir=common.temp_dir("eval"), eval_batch_size=batch, predict_batch_size=batch),
                    params={"num_classes": common.NUM_CLASSES, "learning_rate": 0.001})

    def input_fn(params):
        return common.mnist_dataset(pattern, params["batch_size"], mode=params["mode"])

    est.evaluate(input_fn)  # builds the model (and traces the eval loop)
    model, _, loss_fn = common.build_model(workload)
    model.set_weights(est.model.get_weights())
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return est, input_fn, model, loss_fn


def bare_eval_fn(model, loss_fn, pattern: str, batch: int):
    import tensorflow as tf

    @tf.function
    def evaluate(dataset):
        total, correct, count = tf.constant(0.0), tf.constant(0.0), tf.constant(0.0)
        for x, y in dataset:
            logits = model(x, training=False)
            total += tf.reduce_sum(loss_fn(y, logits))
            correct += tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), y), tf.float32))
            count += tf.cast(tf.shape(y)[0], tf.float32)
        return {"loss": total / count, "accuracy": correct / count, "num_examples": count}

    def run():
        out = evaluate(common.mnist_dataset(pattern, batch, mode="eval", as_dict=False))
        return {k: float(v) for k, v in out.items()}
    return run


def bare_predict_fn(model, pattern: str, batch: int):
    import numpy as np
    import tensorflow as tf

    @tf.function
    def predict(x):
        logits = model(x, training=False)
        return {"probabilities": tf.nn.softmax(logits), "class_id": tf.argmax(logits, -1, output_type=tf.int32)}

    def run():
        out = []
        for x, _ in common.mnist_dataset(pattern, batch, mode="predict", as_dict=False):
            out.append({k: v.numpy() for k, v in predict(x).items()})
        return int(sum(len(o["class_id"]) for o in out)), np.concatenate([o["class_id"] for o in out])
    return run


def timed(fn):
    """(wall s, out, process CPU s) of one call."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t0, out, time.process_time() - c0


def bench_workload(workload: str, pattern: str, n: int, *, batch: int, repeats: int, log, smoke: bool = False) -> dict:
    """`smoke`: the first pass's times stand in for the timed repeats (a smoke run measures nothing)."""
    import numpy as np

    est, input_fn, model, loss_fn = build(workload, pattern, batch)
    bare_eval = bare_eval_fn(model, loss_fn, pattern, batch)
    bare_predict = bare_predict_fn(model, pattern, batch)

    runners = {
        "eval/bare": lambda: timed(bare_eval),
        "eval/estimator": lambda: timed(lambda: est.evaluate(input_fn)),
        "eval/keras": lambda: timed(lambda: model.evaluate(common.mnist_dataset(pattern, batch, mode="eval", as_dict=False),
                                                           verbose=0, return_dict=True)),
        "predict/bare": lambda: timed(bare_predict),
        "predict/estimator": lambda: timed(lambda: list(est.predict(input_fn))),
        "predict/estimator_batches": lambda: timed(lambda: list(est.predict(input_fn, yield_single_examples=False))),
    }
    first = {name: fn() for name, fn in runners.items()}  # traces; not timed
    # Same work: same weights, same examples -> same accuracy and predictions.
    checks = {
        "eval_accuracy_estimator": first["eval/estimator"][1]["accuracy"],
        "eval_accuracy_bare": first["eval/bare"][1]["accuracy"],
        "eval_num_examples_estimator": first["eval/estimator"][1]["num_examples"],
        "predict_count_estimator": len(first["predict/estimator"][1]),
        "predict_count_bare": first["predict/bare"][1][0],
        "predict_same_classes": bool(np.array_equal(
            np.array([p["class_id"] for p in first["predict/estimator"][1]]), first["predict/bare"][1][1])),
    }
    log(f"  {workload}: checks {checks}")
    passes = ({k: [(first[k][0], first[k][2])] for k in runners} if smoke else
              common.interleave({k: (lambda f=f: (lambda r: (r[0], r[2]))(f())) for k, f in runners.items()}, repeats))
    times = {k: [w for w, _ in v] for k, v in passes.items()}
    cpu = {k: [c for _, c in v] for k, v in passes.items()}
    configs = {k: {"examples_per_sec": common.summarize([n / t for t in v]), "seconds": common.summarize(v),
                   "cpu_us_per_example": common.summarize([1e6 * c / n for c in cpu[k]])}
               for k, v in times.items()}
    ratios, cpu_efficiency = {}, {}
    for kind in ("eval", "predict"):
        for name in times:
            if name.startswith(f"{kind}/") and name != f"{kind}/bare":
                ratios[f"{name}/bare"] = common.paired_ratio(times[f"{kind}/bare"], times[name])
                # bare's process CPU per pass / this configuration's (> 1: it does less work)
                cpu_efficiency[f"{name}/bare"] = common.paired_ratio(cpu[f"{kind}/bare"], cpu[name])
    return {"configs": configs, "ratios": ratios, "cpu_efficiency": cpu_efficiency, "checks": checks,
            "plan": {"examples": n, "batch_size": batch, "repeats": repeats}}


def main(argv=None) -> int:
    def extra(p):
        p.add_argument("--workloads", default="linear,cnn")
        p.add_argument("--batch-size", type=int, default=128)

    args = common.standard_args(__doc__.splitlines()[0], argv, extra, default_repeats=None)
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    workdir = common.temp_dir("eval")

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    results, ratios = {}, {}
    for workload in args.workloads.split(","):
        n = 300 if args.smoke else RECORDS[workload]
        pattern = common.write_mnist_records(os.path.join(workdir, workload), n, seed=1)
        repeats = args.repeats or (2 if args.smoke else REPEATS[workload])
        log(f"{workload}: {n} examples, {repeats} repeats")
        res = bench_workload(workload, pattern, n, batch=args.batch_size, repeats=1 if args.smoke else repeats, log=log,
                             smoke=args.smoke)
        results[workload] = res
        for name, c in res["configs"].items():
            log(f"  {workload} {name}: {c['examples_per_sec']['median']:.0f} examples/s "
                f"(spread {c['examples_per_sec']['spread']:.0%})")
        for key, stats in res["ratios"].items():
            target = TARGETS.get((workload, key))
            ratios[f"{workload}:{key}"] = common.check_target(stats, target) if target else stats
            log(f"  {workload} {key} = {common.fmt_ratio(stats)}; cpu-efficiency "
                f"{common.fmt_ratio(res['cpu_efficiency'][key])}")
    targets = {f"{w}:{k}": t for (w, k), t in TARGETS.items() if f"{w}:{k}" in ratios}
    path = common.write_results("eval", args.out, smoke=args.smoke, args=vars(args), results=results,
                                ratios=ratios, targets=targets,
                                notes=["examples/s of one whole pass (eval: every example once, last batch "
                                       "padded); ratios per interleaved repeat (> 1: faster than bare); "
                                       "cpu_efficiency: bare's process CPU per pass / the configuration's"])
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
