"""The TF1 peer of bench_fashion_mnist.py: a TPUEstimator program as TF1 users wrote it.

A `model_fn` with `tf.compat.v1.layers` (the same network as tpuestimator's `cnn`: conv 5x5 32
-> pool -> conv 5x5 64 -> pool -> dense 128 -> dropout 0.4 -> 10 logits), Adam, a
`tf.compat.v1.estimator.tpu.TPUEstimatorSpec` with a `metric_fn` for evaluation, run by
`tf.compat.v1.estimator.tpu.TPUEstimator(use_tpu=False)` (no cluster resolver: on the CPU).

Runs under a TensorFlow 2.15 interpreter (a scratch venv outside the repository, as
benchmarks/tables_tf215_dnn.py; bench_fashion_mnist.py creates it when absent), never under
the project's venv: `tf.estimator` is gone from TensorFlow 2.16+. Imports nothing from
tpuestimator.

    /tmp/tf215venv/bin/python benchmarks/fashion_mnist_tf1.py SPEC.json

SPEC.json (written by bench_fashion_mnist.py) names the train and test TFRecord files (the
MNIST record layout: `image_raw` 784 uint8 bytes, `label` int64), the batch size, learning rate,
shuffle buffer, steps per segment and per loop. Protocol (stdin/stdout, one line each): the
script prints `READY` once built, then for each line `GO` it trains one segment (the TF1 way:
`train(steps=K)`, then `evaluate()` over every test image, each call building its graph and
restoring the latest checkpoint) and prints `SEGMENT <json>`; `STOP` (or end of input) ends it.
Everything else goes to stderr.
"""
from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def model_fn(features, labels, mode, params):
    import tensorflow as tf

    v1 = tf.compat.v1
    training = mode == tf.estimator.ModeKeys.TRAIN
    x = tf.reshape(features, [-1, 28, 28, 1])
    x = v1.layers.conv2d(x, 32, 5, padding="same", activation=tf.nn.relu)
    x = v1.layers.max_pooling2d(x, 2, 2)
    x = v1.layers.conv2d(x, 64, 5, padding="same", activation=tf.nn.relu)
    x = v1.layers.max_pooling2d(x, 2, 2)
    x = v1.layers.flatten(x)
    x = v1.layers.dense(x, 128, activation=tf.nn.relu)
    x = v1.layers.dropout(x, rate=0.4, training=training)
    logits = v1.layers.dense(x, 10)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return v1.estimator.tpu.TPUEstimatorSpec(mode, predictions={"class_ids": tf.argmax(logits, 1)})
    loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if training:
        optimizer = v1.train.AdamOptimizer(params["learning_rate"])
        if params["use_tpu"]:
            optimizer = v1.tpu.CrossShardOptimizer(optimizer)
        train_op = optimizer.minimize(loss, global_step=v1.train.get_global_step())
        return v1.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

    def metric_fn(labels, logits):
        return {"accuracy": v1.metrics.accuracy(labels=labels, predictions=tf.argmax(logits, 1))}

    return v1.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, eval_metrics=(metric_fn, [labels, logits]))


def make_input_fn(pattern: str, train: bool, shuffle_buffer: int, seed: int):
    def input_fn(params):
        import tensorflow as tf

        ds = tf.data.TFRecordDataset(sorted(tf.io.gfile.glob(pattern)))
        ds = ds.cache()
        if train:
            # a new graph per train() call: a new seed per segment, or each segment re-reads the same order
            ds = ds.shuffle(shuffle_buffer, seed=seed).repeat()
        ds = ds.batch(params["batch_size"], drop_remainder=train)
        spec = {"image_raw": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}

        def parse(serialized):
            parsed = tf.io.parse_example(serialized, spec)
            images = tf.cast(tf.reshape(tf.io.decode_raw(parsed["image_raw"], tf.uint8), [-1, 784]), tf.float32)
            return images * (1.0 / 255.0), tf.cast(parsed["label"], tf.int32)

        return ds.map(parse, num_parallel_calls=2).prefetch(2)
    return input_fn


def loop_clock(loop_steps: int, stamps: list):
    """A hook stamping the wall clock after every `loop_steps`-th step of a train() call."""
    import tensorflow as tf

    class _Hook(tf.estimator.SessionRunHook):
        def begin(self):
            self.calls = 0

        def after_run(self, run_context, run_values):
            self.calls += 1
            if self.calls % loop_steps == 0:
                stamps.append(time.perf_counter())
    return _Hook()


def main(argv):
    spec = json.loads(open(argv[1]).read())
    out = sys.stdout
    sys.stdout = sys.stderr  # the protocol owns stdout
    import tensorflow as tf

    v1 = tf.compat.v1
    loop = int(spec["steps_per_loop"])
    config = v1.estimator.tpu.RunConfig(
        model_dir=spec["model_dir"], tf_random_seed=spec.get("seed", 0),
        # the config's cadence; the saver also writes at the end of each train(), which evaluate() restores
        save_checkpoints_steps=spec["save_checkpoints_steps"], log_step_count_steps=10**9,
        tpu_config=v1.estimator.tpu.TPUConfig(iterations_per_loop=loop))
    est = v1.estimator.tpu.TPUEstimator(
        model_fn=model_fn, use_tpu=False, config=config, params={"learning_rate": spec["learning_rate"]},
        train_batch_size=spec["batch_size"], eval_batch_size=spec["eval_batch_size"])
    eval_fn = make_input_fn(spec["eval_files"], False, 0, 0)
    out.write("READY\n")
    out.flush()
    segment = 0
    for line in sys.stdin:
        if line.strip() != "GO":
            break
        stamps: list[float] = []
        t0, c0 = time.perf_counter(), time.process_time()
        est.train(make_input_fn(spec["train_files"], True, spec["shuffle_buffer"], spec.get("seed", 0) + segment),
                  steps=spec["segment_steps"], hooks=[loop_clock(loop, stamps)])
        t1, c1 = time.perf_counter(), time.process_time()
        result = est.evaluate(eval_fn, steps=None)
        t2 = time.perf_counter()
        segment += 1
        out.write("SEGMENT " + json.dumps({
            "step": int(result["global_step"]), "train_wall": t1 - t0, "train_cpu": c1 - c0,
            "steady_wall": (stamps[-1] - stamps[0]) if len(stamps) > 1 else None,
            "steady_steps": (len(stamps) - 1) * loop, "eval_wall": t2 - t1,
            "accuracy": float(result["accuracy"]), "tensorflow": tf.__version__}) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
