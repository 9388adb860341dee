"""The flowers classifier of TPUEstimator's custom-Estimator tutorial, ported to tpuestimator.

The original ("How to write a custom Estimator model for the Cloud TPU", the flowersmodeltpu
trainer) reads JPEG TFRecords (`image/encoded`, `image/class/label` from 1), augments each
training image (resize to +10 pixels, random crop, random left-right flip, random brightness
and contrast, pixels scaled to [-1, 1]), trains a small CNN (`cnn_model`: two convolution +
max-pool blocks, a dense layer with optional batch normalisation, dropout, logits) with Adam
wrapped in CrossShardOptimizer, evaluates accuracy through `eval_metrics`, runs its own
train-then-evaluate loop and exports a SavedModel whose `serving_input_fn` takes one JPEG.
docs/MIGRATING.md ("Ported examples") maps each part of the original to the part below;
this file was written from the tutorial's published structure, not copied from it.

    python examples/porting/flowers_tpu.py --train_data_path 'gs://.../train-*' \
        --eval_data_path 'gs://.../eval-*' --output_dir models/flowers --use_tpu=false
"""
from __future__ import annotations

import argparse
import logging
import os

import keras
import tensorflow as tf

from tpuestimator import Estimator, EvalSpec, ModelSpec, RunConfig, TrainSpec, train_and_evaluate
from tpuestimator.porting import ServingInputReceiver, eval_metrics, metrics, placeholder, serving_input

logger = logging.getLogger("flowers_tpu")

LIST_OF_LABELS = ["daisy", "dandelion", "roses", "sunflowers", "tulips"]
HEIGHT, WIDTH, NUM_CHANNELS = 299, 299, 3


def preprocess_image(image_bytes, params, augment: bool):
    """One JPEG -> float32 [height, width, channels] in [-1, 1]; training images augmented."""
    height, width = params.get("height", HEIGHT), params.get("width", WIDTH)
    image = tf.image.decode_jpeg(image_bytes, channels=NUM_CHANNELS)
    image = tf.image.convert_image_dtype(image, dtype=tf.float32)          # [0, 1]
    if augment:
        image = tf.image.resize(image, [height + 10, width + 10], method="bilinear")
        image = tf.image.random_crop(image, [height, width, NUM_CHANNELS])
        image = tf.image.random_flip_left_right(image)
        image = tf.image.random_brightness(image, max_delta=63.0 / 255.0)
        image = tf.image.random_contrast(image, lower=0.2, upper=1.8)
    else:
        image = tf.image.resize(image, [height, width], method="bilinear")
    return (image - 0.5) * 2.0                                               # [-1, 1]


def read_and_preprocess(example_data, params, augment: bool):
    parsed = tf.io.parse_single_example(example_data, {
        "image/encoded": tf.io.FixedLenFeature((), tf.string, ""),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64, 1),
    })
    label = tf.cast(tf.reshape(parsed["image/class/label"], []), tf.int32) - 1   # labels start at 1
    return {"image": preprocess_image(tf.reshape(parsed["image/encoded"], []), params, augment)}, label


def make_input_fn(pattern: str, mode: str):
    """input_fn(params) over the TFRecords matching `pattern` ('train' or 'eval')."""

    def input_fn(params):
        is_training = mode == "train"
        files = tf.data.Dataset.list_files(pattern, shuffle=is_training, seed=params.get("seed"))
        context = params.get("input_context")
        if context is not None and context.num_input_pipelines > 1:
            files = files.shard(context.num_input_pipelines, context.input_pipeline_id)
        if is_training:
            files = files.repeat()
        ds = files.interleave(lambda f: tf.data.TFRecordDataset(f, buffer_size=8 * 1024 * 1024),
                              cycle_length=min(64, params.get("cycle_length", 64)),
                              num_parallel_calls=tf.data.AUTOTUNE, deterministic=not is_training)
        if is_training:
            ds = ds.shuffle(1024, seed=params.get("seed"))
        ds = ds.map(lambda record: read_and_preprocess(record, params, augment=is_training),
                    num_parallel_calls=tf.data.AUTOTUNE)
        # training: fixed-size batches (static shapes); evaluation: every image once, the last
        # batch padded and masked by the Estimator instead of dropped
        ds = ds.batch(params["batch_size"], drop_remainder=is_training)
        return ds.prefetch(tf.data.AUTOTUNE)
    return input_fn


def cnn_model(image, params):
    """The tutorial's cnn_model as Keras layers: logits [batch, num classes]."""
    nclasses = len(params.get("labels", LIST_OF_LABELS))
    batch_norm = params.get("batch_norm", False)
    x = image
    for filters, ksize in ((params.get("nfil1", 64), params.get("ksize1", 3)),
                           (params.get("nfil2", 32), params.get("ksize2", 3))):
        x = keras.layers.Conv2D(filters, ksize, padding="same", activation="relu")(x)
        x = keras.layers.MaxPooling2D(pool_size=2, strides=2)(x)
    x = keras.layers.Flatten()(x)
    if batch_norm:   # Keras runs the moving-average updates TF1 needed UPDATE_OPS for
        x = keras.layers.Activation("relu")(keras.layers.BatchNormalization()(
            keras.layers.Dense(params.get("dense_units", 300))(x)))
    else:
        x = keras.layers.Dense(params.get("dense_units", 300), activation="relu")(x)
    x = keras.layers.Dropout(params.get("dprob", 0.25))(x)
    ylogits = keras.layers.Dense(nclasses, dtype="float32", name="logits")(x)
    if batch_norm:
        ylogits = keras.layers.BatchNormalization(dtype="float32")(ylogits)
    return ylogits


def image_classifier(params):
    """The tutorial's model function: probabilities, class id and class, cross-entropy, Adam,
    accuracy through eval_metrics."""
    labels_list = list(params.get("labels", LIST_OF_LABELS))
    image = keras.Input((params.get("height", HEIGHT), params.get("width", WIDTH), NUM_CHANNELS), name="image")
    ylogits = cnn_model(image, params)

    def predictions(ylogits):
        probabilities = tf.nn.softmax(ylogits)
        # the tutorial's "classid"; the Estimator adds "class" from class_names on the host (TPUs have no strings)
        return {"probabilities": probabilities, "class_id": tf.argmax(probabilities, 1, output_type=tf.int32)}

    def metric_fn(class_int, labels):
        return {"accuracy": metrics.accuracy(class_int, labels)}

    def class_int(labels, ylogits):
        return tf.argmax(ylogits, 1, output_type=tf.int32)

    return ModelSpec(
        model=keras.Model(image, ylogits, name="flowers"),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None),
        optimizer=keras.optimizers.Adam(learning_rate=params["learning_rate"]),
        metrics=eval_metrics(metric_fn, [class_int, "labels"], outputs=ylogits),
        predictions=predictions,
        class_names=labels_list,   # adds "class" = tf.gather(labels, class id), in predictions and exports
    )


def make_serving_input_fn(params):
    """The tutorial's serving_input_fn: ONE JPEG per request (input `image_bytes`, a scalar)."""
    def serving_input_fn():
        feature_placeholders = {"image_bytes": placeholder(tf.string, shape=())}
        image = preprocess_image(tf.squeeze(feature_placeholders["image_bytes"]), params, augment=False)
        features = {"image": tf.expand_dims(image, 0)}
        return ServingInputReceiver(features, feature_placeholders)
    return serving_input_fn


def train_and_evaluate_flowers(output_dir: str, hparams: dict) -> dict:
    """Trains with an evaluation every `steps_per_eval` steps, then exports; returns the last
    evaluation and the export's path."""
    config = RunConfig(model_dir=output_dir, train_batch_size=hparams["train_batch_size"],
                       eval_batch_size=hparams["eval_batch_size"], predict_batch_size=hparams["eval_batch_size"],
                       iterations_per_loop=hparams["steps_per_eval"], save_checkpoints_steps=hparams["steps_per_eval"],
                       strategy="tpu" if hparams["use_tpu"] else "cpu", tpu=hparams.get("tpu"),
                       zone=hparams.get("tpu_zone"), project=hparams.get("project"), seed=hparams.get("seed"))
    estimator = Estimator(image_classifier, config, hparams)
    result = train_and_evaluate(
        estimator,
        TrainSpec(input_fn=make_input_fn(hparams["train_data_path"], "train"), max_steps=hparams["train_steps"]),
        EvalSpec(input_fn=make_input_fn(hparams["eval_data_path"], "eval"), every_n_steps=hparams["steps_per_eval"]))
    export_dir = estimator.export_saved_model(
        os.path.join(output_dir, "export", "exporter"),
        serving_inputs={"serving_default": serving_input(make_serving_input_fn(hparams))})
    return {"eval": result.metrics, "history": result.history, "export_dir": export_dir}


def parse_args(argv=None) -> dict:
    def boolean(text):
        return str(text).lower() in ("1", "true", "yes")

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train_data_path", required=True)
    p.add_argument("--eval_data_path", required=True)
    p.add_argument("--output_dir", required=True)
    p.add_argument("--labels", default=",".join(LIST_OF_LABELS), help="class names, comma separated, label 1 first")
    p.add_argument("--height", type=int, default=HEIGHT)
    p.add_argument("--width", type=int, default=WIDTH)
    p.add_argument("--train_batch_size", type=int, default=256)
    p.add_argument("--eval_batch_size", type=int, default=256)
    p.add_argument("--train_steps", type=int, default=3000)
    p.add_argument("--steps_per_eval", type=int, default=1000)
    p.add_argument("--learning_rate", type=float, default=0.0001)
    p.add_argument("--nfil1", type=int, default=64)
    p.add_argument("--nfil2", type=int, default=32)
    p.add_argument("--ksize1", type=int, default=3)
    p.add_argument("--ksize2", type=int, default=3)
    p.add_argument("--dprob", type=float, default=0.25)
    p.add_argument("--batch_norm", type=boolean, default=False)
    p.add_argument("--use_tpu", type=boolean, default=True)
    p.add_argument("--tpu", default=None)
    p.add_argument("--tpu_zone", default=None)
    p.add_argument("--project", default=None)
    p.add_argument("--seed", type=int, default=None)
    args = vars(p.parse_args(argv))
    args["labels"] = [name for name in args["labels"].split(",") if name]
    return args


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    hparams = parse_args()
    print(train_and_evaluate_flowers(hparams["output_dir"], hparams))
