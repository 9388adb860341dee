"""Model functions the cluster tests' `tpuestimator train` tasks load by name
(`model: cluster_models:counted_ids`, with tests/python on PYTHONPATH)."""
from __future__ import annotations

from tpuestimator.models.embedding import sharded_embedding
from tpuestimator.spec import ModelSpec


def counted_ids(params):
    """Classifies `x` (float [4]) with an embedding of `id`, and counts on the ps how often each
    id went through a training step (`seen_ids/seen`, a non-trainable weight in the
    checkpoint): two workers that trained the same batch would count its ids twice."""
    import keras
    import tensorflow as tf

    ids_count = params["num_ids"]

    class SeenIds(keras.layers.Layer):
        def build(self, shape):
            self.seen = self.add_weight(shape=(ids_count,), initializer="zeros", trainable=False, name="seen")

        def call(self, ids, training=False):
            ids = tf.cast(tf.reshape(ids, [-1]), tf.int32)
            if training:  # the tf.Variable's own assign_add: atomic on the ps (Keras 3's reads, adds,
                # then assigns, so two workers' concurrent updates could lose one)
                self.seen.value.assign_add(tf.math.bincount(ids, minlength=ids_count, maxlength=ids_count,
                                                      dtype=tf.float32))
            return ids

    inputs = {"id": keras.Input(shape=(), dtype="int64", name="id"),
              "x": keras.Input(shape=(4,), dtype="float32", name="x")}
    ids = SeenIds(name="seen_ids")(inputs["id"])
    features = keras.layers.Concatenate()([inputs["x"], sharded_embedding(ids_count, 4, name="id_embedding")(ids)])
    logits = keras.layers.Dense(params["num_classes"], name="logits")(features)
    return ModelSpec(model=keras.Model(inputs, logits), optimizer=keras.optimizers.Adam(0.05),
                     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None))
