"""The MNIST example of the public TPU reference models, ported to tpuestimator.

The original (tensorflow/tpu, models/official/mnist/mnist_tpu.py) trains a two-convolution
CNN with TPUEstimator: TF1 layers, a plain SGD optimizer on an exponentially decaying
learning rate, wrapped in CrossShardOptimizer on a TPU, `iterations_per_loop` steps per TPU
call, an accuracy `metric_fn` for evaluation and a few predictions at the end; the
tensorflow/models version of the same program exports a SavedModel whose signature takes raw
images. docs/MIGRATING.md ("Ported examples") maps each part of the original to the part
below; this file was written from the original's structure, not copied from it.

    python examples/porting/mnist_tpu.py --data_dir DIR --model_dir models/mnist --use_tpu=false
"""
from __future__ import annotations

import argparse
import logging
import os

import keras
import tensorflow as tf

from tpuestimator import Estimator, ModelSpec, RunConfig
from tpuestimator.porting import build_raw_serving_input_receiver_fn, eval_metrics, metrics, serving_input

logger = logging.getLogger("mnist_tpu")


def metric_fn(labels, logits):
    """The original's metric function; `tf.metrics` -> `porting.metrics`, nothing else."""
    return {"accuracy": metrics.accuracy(labels=labels, predictions=tf.argmax(logits, axis=1))}


def model_fn(params):
    """The original's model: conv(32, 5) -> pool -> conv(32, 5) -> pool -> dense(1024) -> dropout(0.4)
    -> dense(10), on pixels scaled from [0, 255] to [0, 1]; SGD on exponential decay."""
    size = params.get("image_size", 28)
    image = keras.Input((size, size, 1), name="image")
    y = keras.layers.Rescaling(1.0 / 255.0)(image)
    for _ in range(2):
        y = keras.layers.Conv2D(filters=32, kernel_size=5, padding="same", activation="relu")(y)
        y = keras.layers.MaxPooling2D(pool_size=2, strides=2, padding="same")(y)
    y = keras.layers.Flatten()(y)
    y = keras.layers.Dense(1024, activation="relu")(y)
    y = keras.layers.Dropout(0.4)(y)          # Keras applies it in training only (the original's `mode == TRAIN`)
    logits = keras.layers.Dense(10, dtype="float32", name="logits")(y)

    # tf.train.exponential_decay(lr, global_step, decay_steps=100000, decay_rate=0.96): the
    # schedule receives the step from the optimizer; no CrossShardOptimizer (the strategy sums).
    schedule = keras.optimizers.schedules.ExponentialDecay(params["learning_rate"], decay_steps=100000,
                                                           decay_rate=0.96)

    def predictions(logits):
        return {"class_ids": tf.argmax(logits, axis=1), "probabilities": tf.nn.softmax(logits)}

    return ModelSpec(
        model=keras.Model(image, logits, name="mnist"),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None),
        optimizer=keras.optimizers.SGD(learning_rate=schedule),
        metrics=eval_metrics(metric_fn, ["labels", "logits"], outputs=logits),
        predictions=predictions,
    )


def dataset(records_file, image_size=28):
    """MNIST TFRecords (`image_raw`: uint8 pixels, `label`: int64) -> (features, label)."""
    features = {"image_raw": tf.io.FixedLenFeature((), tf.string), "label": tf.io.FixedLenFeature((), tf.int64)}

    def decode_record(record):
        example = tf.io.parse_single_example(record, features)
        image = tf.cast(tf.io.decode_raw(example["image_raw"], tf.uint8), tf.float32)
        image = tf.reshape(image, [image_size, image_size, 1])
        return {"image": image}, tf.cast(example["label"], tf.int32)

    return tf.data.TFRecordDataset(records_file).map(decode_record)


def _records(params, key, default):
    return os.path.join(params["data_dir"], params.get(key, default))


def train_input_fn(params):
    """Cached, repeated, shuffled, fixed-size batches of params['batch_size'] (per replica)."""
    ds = dataset(_records(params, "train_file", "train.tfrecords"), params.get("image_size", 28))
    context = params.get("input_context")
    if context is not None and context.num_input_pipelines > 1:   # TPUEstimator split the input per host itself
        ds = ds.shard(context.num_input_pipelines, context.input_pipeline_id)
    return ds.cache().repeat().shuffle(buffer_size=50000, seed=params.get("seed")).batch(
        params["batch_size"], drop_remainder=True)


def eval_input_fn(params):
    """Every evaluation example once: the last partial batch is padded and masked, not dropped."""
    ds = dataset(_records(params, "eval_file", "validation.tfrecords"), params.get("image_size", 28))
    return ds.batch(params["batch_size"])


def predict_input_fn(params):
    ds = dataset(_records(params, "predict_file", "test.tfrecords"), params.get("image_size", 28))
    return ds.take(10).batch(params["batch_size"])


def image_serving_input_fn(image_size=28):
    """A SavedModel signature taking raw float images [batch, size, size, 1] (input `image`)."""
    return build_raw_serving_input_receiver_fn({"image": tf.TensorSpec([None, image_size, image_size, 1], tf.float32)})


def parse_args(argv=None):
    def boolean(text):
        return str(text).lower() in ("1", "true", "yes")

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tpu", default=None, help="the Cloud TPU's name or grpc:// address")
    p.add_argument("--tpu_zone", default=None)
    p.add_argument("--gcp_project", default=None)
    p.add_argument("--data_dir", default="", help="the folder of the MNIST TFRecords")
    p.add_argument("--train_file", default="train.tfrecords")
    p.add_argument("--eval_file", default="validation.tfrecords")
    p.add_argument("--predict_file", default="test.tfrecords")
    p.add_argument("--image_size", type=int, default=28, help="28 for MNIST, 8 for the bundled digits")
    p.add_argument("--model_dir", required=True)
    p.add_argument("--batch_size", type=int, default=1024, help="GLOBAL batch size (all replicas)")
    p.add_argument("--train_steps", type=int, default=1000)
    p.add_argument("--eval_steps", type=int, default=0, help="0: no evaluation; else evaluate every example once")
    p.add_argument("--learning_rate", type=float, default=0.05)
    p.add_argument("--use_tpu", type=boolean, default=True)
    p.add_argument("--enable_predict", type=boolean, default=True)
    p.add_argument("--iterations", type=int, default=50, help="training steps per device call")
    p.add_argument("--export_dir", default=None)
    p.add_argument("--seed", type=int, default=None)
    return p.parse_args(argv)


def main(args) -> dict:
    """Trains, evaluates, predicts and exports as the original did; returns what it got."""
    config = RunConfig(model_dir=args.model_dir, train_batch_size=args.batch_size, eval_batch_size=args.batch_size,
                       predict_batch_size=args.batch_size, iterations_per_loop=args.iterations,
                       strategy="tpu" if args.use_tpu else "cpu", tpu=args.tpu, zone=args.tpu_zone,
                       project=args.gcp_project, seed=args.seed)
    params = {"data_dir": args.data_dir, "learning_rate": args.learning_rate, "image_size": args.image_size,
              "train_file": args.train_file, "eval_file": args.eval_file, "predict_file": args.predict_file}
    estimator = Estimator(model_fn, config, params)
    estimator.train(train_input_fn, max_steps=args.train_steps)
    out: dict = {"global_step": estimator.global_step}
    if args.eval_steps:
        out["eval"] = estimator.evaluate(eval_input_fn)
        logger.info("evaluation: %s", out["eval"])
    if args.enable_predict:
        out["predictions"] = []
        for pred in estimator.predict(predict_input_fn):
            class_id = int(pred["class_ids"])
            out["predictions"].append((class_id, float(pred["probabilities"][class_id])))
            logger.info('Prediction is "%d" (%.1f%%).', class_id, 100 * pred["probabilities"][class_id])
    if args.export_dir:
        out["export_dir"] = estimator.export_saved_model(
            args.export_dir, serving_inputs={"serving_default": serving_input(image_serving_input_fn(args.image_size))})
    return out


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    print(main(parse_args()))
