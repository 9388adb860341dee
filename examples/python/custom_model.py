"""A custom model function and input function with the Estimator API (no config file).

Run: .venv/bin/python examples/python/custom_model.py [--steps 300] [--replicas 8]

It writes the bundled `shapes` example (synthetic JPEGs in TPUEstimator's flowers format), trains
TPUEstimator's flowers image classifier written as a user model function, evaluates every eval image
exactly once, predicts class strings and exports a SavedModel.
"""
from __future__ import annotations

import argparse
import tempfile


def image_classifier(params):
    """TPUEstimator's flowers `image_classifier`, TensorFlow 2 form: no mode branches, no CrossShardOptimizer."""
    import keras
    import tensorflow as tf

    from tpuestimator import ModelSpec

    labels = params["vocabulary"]
    image = keras.Input(shape=tuple(params["feature_spec"]["image"][0]), name="image")
    x = keras.layers.Conv2D(32, 3, padding="same", activation="relu")(image)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Conv2D(32, 3, padding="same", activation="relu")(x)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Dropout(0.25)(keras.layers.Dense(64, activation="relu")(keras.layers.Flatten()(x)))
    ylogits = keras.layers.Dense(len(labels), dtype="float32")(x)

    def predictions(ylogits):
        probabilities = tf.nn.softmax(ylogits)
        return {"probabilities": probabilities, "class_id": tf.argmax(probabilities, 1, output_type=tf.int32)}

    return ModelSpec(model=keras.Model(image, ylogits),
                     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None),
                     optimizer=keras.optimizers.Adam(params["learning_rate"]),
                     metrics={"accuracy": keras.metrics.SparseCategoricalAccuracy()},
                     predictions=predictions, class_names=labels)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--replicas", type=int, default=1, help="logical CPU devices (8 rehearses a TPU)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    import tpuestimator as te
    from tpuestimator import data
    from tpuestimator.core.devices import split_cpu
    from tpuestimator.examples import write_example

    if args.replicas > 1:
        split_cpu(args.replicas)
    out = args.out or tempfile.mkdtemp(prefix="tpuestimator-example-")
    cfg = te.load_config(write_example("shapes", f"{out}/shapes"))
    section = cfg.data
    est = te.Estimator(image_classifier,
                       te.RunConfig(model_dir=f"{out}/model", train_batch_size=32, eval_batch_size=32,
                                    iterations_per_loop=50, save_checkpoints_steps=100,
                                    strategy="mirrored" if args.replicas > 1 else "cpu"),
                       params={"learning_rate": 3e-3, "vocabulary": data.vocabulary(section)})
    est.train(data.make_input_fn(section, "train"), max_steps=args.steps)
    metrics = est.evaluate(data.make_input_fn(section, "eval"))
    first = next(est.predict(data.make_input_fn(section, "eval")))
    export = est.export_saved_model(f"{out}/export")
    print(f"eval: {metrics}")
    print(f"first prediction: class={first['class']!s} p={first['probabilities'].max():.3f}")
    print(f"export: {export}")
    return metrics


if __name__ == "__main__":
    main()
