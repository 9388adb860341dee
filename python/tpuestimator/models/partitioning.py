"""How `run.ps_partition` shards variables over the ps tasks of a ParameterServerStrategy.

TensorFlow's `MinSizePartitioner` turns a large variable into a `tf.distribute.ShardedVariable`
(row shards placed round-robin on the ps tasks). Keras 3 can neither update nor checkpoint a
Keras weight made of one ("doesn't support being used as a reference"; the saver asks it for
a `device`), so a layer that wants its table sharded owns the shards itself as ordinary
weights (`models.embedding.ShardedEmbedding`): it asks `shard_count` how many the partitioner
would make and creates them inside `whole_variables()`, where the partitioner leaves each
shard whole, and the strategy's round-robin placement puts consecutive shards on
consecutive ps tasks.
"""
from __future__ import annotations

import contextlib
import contextvars
import weakref

_WHOLE = contextvars.ContextVar("tpuestimator_whole_variables", default=False)
# strategy -> its PsPartitioner (a strategy exposes no public handle on its partitioner)
_BY_STRATEGY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class PsPartitioner:
    """`MinSizePartitioner(min_shard_bytes, max_shards)`, except inside `whole_variables()`."""

    def __init__(self, *, min_shard_bytes: int, max_shards: int):
        import tensorflow as tf

        self.min_shard_bytes, self.max_shards = min_shard_bytes, max_shards
        self.inner = tf.distribute.experimental.partitioners.MinSizePartitioner(
            min_shard_bytes=min_shard_bytes, max_shards=max_shards)

    def __call__(self, shape, dtype):
        if _WHOLE.get():
            return [1] * len(shape)
        return self.inner(shape, dtype)


def register(strategy, partitioner: PsPartitioner) -> None:
    """Remembers `strategy`'s partitioner for `shard_count`."""
    _BY_STRATEGY[strategy] = partitioner


def shard_count(strategy, shape, dtype) -> int:
    """How many row shards `strategy`'s `run.ps_partition` gives a variable of `shape` (1 without
    one)."""
    import tensorflow as tf

    partitioner = _BY_STRATEGY.get(strategy)
    if partitioner is None:
        return 1
    return int(partitioner.inner(tf.TensorShape(shape), tf.as_dtype(dtype))[0])


@contextlib.contextmanager
def whole_variables():
    """Variables created in this block are not partitioned (a layer's own shards)."""
    token = _WHOLE.set(True)
    try:
        yield
    finally:
        _WHOLE.reset(token)


def row_split(rows: int, shards: int) -> list[int]:
    """Rows per shard as `tf.nn.embedding_lookup`'s 'div' partitioning expects: the first
    `rows % shards` shards one row more."""
    return [rows // shards + (1 if i < rows % shards else 0) for i in range(shards)]
