"""Seed 000's flowers classifier (`image_classifier` + `cnn_model`), as a TF2 model function.

The seed computes logits, then `probabilities = softmax(logits)`, `class_int = argmax` and
`class_str = tf.gather(LIST_OF_LABELS, class_int)`; the Estimator adds `class` from
`class_names` the same way, in predictions and in the exported signature.
"""
from __future__ import annotations

from tpuestimator.models._layers import accuracy_report, classifier_loss, image_input
from tpuestimator.models.params import DataParams
from tpuestimator.spec import ModelSpec, classification_predictions
from tpuestimator.system.graph_code import as_written


def image_classifier(params: dict) -> ModelSpec:
    """Two conv + pool blocks (with batch norm), a dense layer with dropout, then logits.

    params: learning_rate (default 0.001), num_classes, nfil1 (64), nfil2 (32), ksize1 (3),
    ksize2 (3), dense_units (num_classes * 8 as in the flowers example's cnn_model sizing), dprob (0.25),
    batch_norm (true).
    """
    import keras

    data = DataParams.from_params(params)
    n = data.classes()
    inputs, image = image_input(params)
    bn = params.get("batch_norm", True)

    def block(x, filters, ksize):
        x = keras.layers.Conv2D(filters, ksize, padding="same", use_bias=not bn)(x)
        if bn:
            # The seed ran UPDATE_OPS under control_dependencies for this; Keras tracks it.
            x = keras.layers.BatchNormalization()(x)
        x = keras.layers.Activation("relu")(x)
        return keras.layers.MaxPooling2D(pool_size=2, strides=2)(x)

    x = block(image, params.get("nfil1", 64), params.get("ksize1", 3))
    x = block(x, params.get("nfil2", 32), params.get("ksize2", 3))
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(params.get("dense_units", n * 8), activation="relu")(x)
    x = keras.layers.Dropout(params.get("dprob", 0.25))(x)
    ylogits = keras.layers.Dense(n, dtype="float32", name="logits")(x)
    return ModelSpec(
        model=keras.Model(inputs, ylogits, name="image_classifier"),
        loss=classifier_loss(),
        optimizer=keras.optimizers.Adam(learning_rate=params.get("learning_rate", 0.001)),
        metrics={"accuracy": keras.metrics.SparseCategoricalAccuracy()},
        report=accuracy_report(),
        predictions=as_written(classification_predictions),
        class_names=data.class_names,
    )
