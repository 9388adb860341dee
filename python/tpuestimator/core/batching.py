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


def worker_share(ds, *, worker: int, workers: int, per_replica: int):
    """One worker's share of `pad_and_mask`'s padded global batches, as per-replica batches.

    Multi-worker evaluation: every worker reads the same padded global batches (so every
    worker runs the same number of steps, which the collective all-reduce of the metrics
    needs) and keeps its own contiguous slice of each: worker w takes rows
    `[w * rows, (w + 1) * rows)` (`rows` = global batch / workers), cut into per-replica
    batches for its local replicas. The slices partition each global batch, so every
    example is evaluated exactly once across the cluster.
    """
    import tensorflow as tf

    def take(*element):
        def cut(x):
            rows = x.shape[0] // workers
            return x[worker * rows:(worker + 1) * rows]
        return tf.nest.map_structure(cut, element if len(element) > 1 else element[0])

    return ds.map(take).rebatch(per_replica).prefetch(tf.data.AUTOTUNE)
