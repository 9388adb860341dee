"""`ShardedEmbedding`: a Keras `Embedding` whose table is sharded over parameter servers.

Under `run.strategy: parameter_server` with `run.ps_partition`, a table the partitioner would
split (`partitioning.shard_count` > 1) is built as that many ordinary weights, one row shard
each ('div' partitioning: the first `rows % shards` shards one row more), which the strategy
places round-robin on the ps tasks (`partitioning.whole_variables`). It looks ids up with
`tf.nn.embedding_lookup` on the shards: a worker fetches only the rows of its batch, and each
shard's gradient is the `IndexedSlices` of its own rows, applied by the Keras optimizer on the
shard's ps task. Without sharding it is a plain `keras.layers.Embedding`.
"""
from __future__ import annotations

import functools


@functools.cache
def sharded_embedding_class():
    """The layer class (defined on first use: modules import Keras inside functions)."""
    import keras
    import tensorflow as tf

    from tpuestimator.models.partitioning import row_split, shard_count, whole_variables

    @keras.saving.register_keras_serializable(package="tpuestimator")
    class ShardedEmbedding(keras.layers.Embedding):
        """`keras.layers.Embedding(input_dim, output_dim, ...)` whose table may be row shards."""

        def build(self, input_shape=None):
            shards = shard_count(tf.distribute.get_strategy(), (self.input_dim, self.output_dim),
                                 self.variable_dtype)
            if shards <= 1:
                self.shards = None
                return super().build(input_shape)
            with whole_variables():
                self.shards = [
                    self.add_weight(shape=(rows, self.output_dim), initializer=self.embeddings_initializer,
                                    regularizer=self.embeddings_regularizer, constraint=self.embeddings_constraint,
                                    name=f"embeddings_shard_{i}", trainable=True)
                    for i, rows in enumerate(row_split(self.input_dim, shards))]
            self.built = True

        def call(self, inputs):
            if not self.shards:
                return super().call(inputs)
            if inputs.dtype not in (tf.int32, tf.int64):
                inputs = tf.cast(inputs, tf.int32)
            rows = tf.nn.embedding_lookup([shard.value for shard in self.shards], inputs)  # 'div'
            return tf.cast(rows, self.compute_dtype)

    return ShardedEmbedding


def sharded_embedding(input_dim: int, output_dim: int, **kwargs):
    """A `ShardedEmbedding` layer (`keras.layers.Embedding`'s arguments)."""
    return sharded_embedding_class()(input_dim, output_dim, **kwargs)
