"""Evaluation and prediction input: every example exactly once, in static shapes.

Used with several replicas or on a TPU (`Estimator._eval_input`); one replica on CPU or GPU
reads the batches unpadded.

Each per-replica batch (the last one possibly partial) is padded to the per-replica size
with a mask (`MASK_KEY`); then groups of `num_replicas` batches are padded with all-masked
batches and concatenated into one global batch, which the strategy splits back in order.
All shapes stay static (as TPUs require); loss and metrics weigh each example by the mask.
"""
from __future__ import annotations

from tpuestimator.spec import split_element

MASK_KEY = "__mask__"


def pad_and_mask(ds, *, per_replica: int, replicas: int, steps: int | None):
    """The dataset of (possibly partial) batches -> padded, masked global batches."""
    import tensorflow as tf

    def pad_to(x, size):
        n = tf.shape(x)[0]
        paddings = [[0, size - n]] + [[0, 0]] * (len(x.shape) - 1)
        out = tf.pad(x, paddings)
        return tf.ensure_shape(out, [size] + list(x.shape[1:]))

    def pad_batch(*element):
        features, labels = split_element(element if len(element) > 1 else element[0])
        n = tf.shape(next(iter(features.values())))[0]
        out = {k: pad_to(v, per_replica) for k, v in features.items()}
        out[MASK_KEY] = tf.sequence_mask(n, per_replica, dtype=tf.float32)
        if labels is not None:
            return out, pad_to(labels, per_replica)
        return (out,)

    def merge_group(*element):
        def flatten(x):
            x = pad_to(x, replicas)
            return tf.reshape(x, [replicas * per_replica] + list(x.shape[2:]))
        return tf.nest.map_structure(flatten, element)

    ds = ds.map(pad_batch)
    if replicas > 1:  # with one replica the group is the batch itself
        ds = ds.batch(replicas).map(merge_group)
    if steps is not None:
        ds = ds.take(steps)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return ds.with_options(options).prefetch(tf.data.AUTOTUNE)
