"""A model function for `data.transpose_input: true` (`model: transposed_models:transposed_conv`,
tests/python on sys.path): it receives images as [h, w, c, b], as TPUEstimator's flowers example's
model did, and transposes them back itself."""
from __future__ import annotations

from tpuestimator.spec import ModelSpec, classification_predictions


def transposed_conv(params: dict) -> ModelSpec:
    """image [h, w, c, b] -> transpose to [b, h, w, c] -> conv 3x3 (4) -> flatten -> logits (the conv
    needs the channels last: an image served as [b, h, w, c] cannot pass unnoticed).

    params: image_shape ([h, w, c]), num_classes, learning_rate (0.01).
    """
    import keras
    import tensorflow as tf

    height, width, channels = params["image_shape"]
    classes = int(params["num_classes"])

    class TransposedConv(keras.Model):
        def __init__(self):
            super().__init__(name="transposed_conv")
            self.conv = keras.layers.Conv2D(4, 3, activation="relu")
            self.flatten = keras.layers.Flatten()
            self.logits = keras.layers.Dense(classes, name="logits")

        def call(self, image, training=False):
            image = tf.transpose(image, [3, 0, 1, 2])   # [h, w, c, b] -> [b, h, w, c]
            image = tf.ensure_shape(image, [None, height, width, channels])
            return self.logits(self.flatten(self.conv(image)))

    model = TransposedConv()
    model(tf.zeros([height, width, channels, 1]))   # built on the layout it receives
    return ModelSpec(model=model,
                     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None),
                     optimizer=keras.optimizers.Adam(learning_rate=float(params.get("learning_rate", 0.01))),
                     predictions=classification_predictions, class_names=params.get("vocabulary"))
