"""Seed 002 (chapter 19)'s MNIST CNN, as a TensorFlow 2 model function.

TPUEstimator's MNIST example's TF1 `model_fn` with `tf.layers` becomes a Keras model; `CrossShardOptimizer` and
the `mode` branches disappear (the Estimator handles replicas and modes).
"""
from __future__ import annotations

from tpuestimator.models._layers import accuracy_report, classifier_loss, image_input
from tpuestimator.models.params import DataParams
from tpuestimator.spec import ModelSpec, classification_predictions
from tpuestimator.system.graph_code import as_written


def cnn(params: dict) -> ModelSpec:
    """conv 5x5 (32) -> pool -> conv 5x5 (64) -> pool -> dense 128 -> dropout 0.4 -> logits.

    params: learning_rate (default 0.001), num_classes, filters ([32, 64]), kernel_size (5),
    dense_units (128), dropout (0.4), optimizer ("adam" or "sgd"; the TPUEstimator example used SGD with an
    exponentially decaying rate).
    """
    import keras

    data = DataParams.from_params(params)
    filters = params.get("filters", [32, 64])
    kernel = params.get("kernel_size", 5)
    inputs, image = image_input(params)
    x = image
    for f in filters:
        x = keras.layers.Conv2D(f, kernel, padding="same", activation="relu")(x)
        # Pool only while the feature map is at least 2x2: 8x8 digits survive two pools.
        if x.shape[1] >= 2 and x.shape[2] >= 2:
            x = keras.layers.MaxPooling2D(pool_size=2, strides=2)(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(params.get("dense_units", 128), activation="relu")(x)
    x = keras.layers.Dropout(params.get("dropout", 0.4))(x)
    logits = keras.layers.Dense(data.classes(), dtype="float32", name="logits")(x)
    model = keras.Model(inputs, logits, name="cnn")

    lr = params.get("learning_rate", 0.001)
    if params.get("optimizer", "adam") == "sgd":
        schedule = keras.optimizers.schedules.ExponentialDecay(lr, decay_steps=100000, decay_rate=0.96)
        optimizer = keras.optimizers.SGD(learning_rate=schedule)
    else:
        optimizer = keras.optimizers.Adam(learning_rate=lr)
    return ModelSpec(
        model=model,
        loss=classifier_loss(),
        optimizer=optimizer,
        metrics={"accuracy": keras.metrics.SparseCategoricalAccuracy()},
        report=accuracy_report(),
        predictions=as_written(classification_predictions),
        class_names=data.class_names,
    )
