"""The training stream of records, epoch by epoch, and how a resumed training jumps into it.

Each epoch reads every file once, in an order drawn for that epoch (stateless, keyed by the
run seed and the epoch number); its records are cut into consecutive windows of `window`
records (the last one shorter), each permuted uniformly by a stateless shuffle keyed by the
run seed, the epoch and the window's index in the epoch. The permuted records of all epochs,
one after another, are cut into training batches.

Nothing in an epoch depends on the epochs before it, so the stream can start anywhere: a
training resumed after R records counts the records of one epoch (N), starts at epoch
R // N, skips the whole windows before its position (read, not permuted) and drops the first
records of the window it lands in. The cost is at most two epochs of reading, however many
epochs were done (benchmarks/bench_resume.py), and the batches are the ones an uninterrupted
run reads (tests/python/test_exact_resume.py). Skipping batch by batch, as `Dataset.skip`
does, costs reading every record ever trained on.

Why windows and not `Dataset.shuffle`: a sliding buffer's per-record work runs on the single
input thread; one vectorised permutation per window in a parallel map gave 2.5x the
records/s on 28x28 records (benchmarks/input_results.md).
"""
from __future__ import annotations

import logging
from collections.abc import Callable

import tensorflow as tf

from tpuestimator.system.graph_code import as_written

log = logging.getLogger(__name__)

# Keep the file orders' and the windows' random streams apart (both keyed by the run seed).
_FILES_STREAM = 0xF11E5
_WINDOWS_STREAM = 0x3D0E5
_INFINITE = 2**62


def _seed(seed: int, stream: int, *indices) -> tf.Tensor:
    out = tf.constant([int(seed), stream], tf.int64)
    for index in indices:
        out = tf.random.experimental.stateless_fold_in(out, tf.cast(index, tf.int64), alg="philox")
    return out


def epoch_files(files: list[str], seed: int, epoch) -> tf.data.Dataset:
    """The file names in `epoch`'s order (a tensor or int epoch)."""
    names = tf.constant(files)
    if len(files) > 1:
        names = tf.random.experimental.stateless_shuffle(names, seed=_seed(seed, _FILES_STREAM, epoch))
    return tf.data.Dataset.from_tensor_slices(names)


def window_size(buffer: int, batch_size: int) -> int:
    """`data.shuffle_buffer` records rounded up to whole batches."""
    return max(1, -(-int(buffer) // batch_size)) * batch_size


def count_records(chunks: tf.data.Dataset) -> tf.Tensor:
    """Records in one epoch of chunks (1-D string tensors), an int64 tensor: one read of the epoch."""
    return chunks.reduce(tf.constant(0, tf.int64), lambda n, chunk: n + tf.size(chunk, out_type=tf.int64))


def shuffled_batches(read_epoch: Callable[[tf.Tensor], tf.data.Dataset], *, window: int, batch_size: int,
                     seed: int | None, skip_batches: int = 0, records_per_epoch: int | None = None
                     ) -> tf.data.Dataset:
    """The endless stream of training batches of serialized records (module docstring),
    starting after its first `skip_batches` batches: `shuffled_windows` cut by `cut_batches`.
    Arguments as `shuffled_windows`."""
    return cut_batches(shuffled_windows(read_epoch, window=window, batch_size=batch_size, seed=seed,
                                        skip_batches=skip_batches, records_per_epoch=records_per_epoch),
                       batch_size)


def cut_batches(windows: tf.data.Dataset, batch_size: int) -> tf.data.Dataset:
    """The windows of `shuffled_windows` (or anything decoded from them record by record) cut
    into the endless stream of training batches: the records of all windows, one after another,
    `batch_size` at a time."""
    return endless(windows.rebatch(batch_size, drop_remainder=True))


def shuffled_windows(read_epoch: Callable[[tf.Tensor], tf.data.Dataset], *, window: int, batch_size: int,
                     seed: int | None, skip_batches: int = 0, records_per_epoch: int | None = None
                     ) -> tf.data.Dataset:
    """The permuted windows of serialized records (1-D string tensors of at most `window`
    records) whose records, one after another, are the training stream after its first
    `skip_batches` batches (`cut_batches` makes the batches). A pipeline may decode each window
    whole before the cut (record by record: a record's values depend on that record alone):
    the batches hold the same values, and the per-call costs of parsing and preprocessing are
    paid once per window instead of once per batch.

    Args:
      read_epoch: `epoch (int64 tensor) -> dataset of record chunks` (1-D string tensors): the
        records of that epoch, in its file order.
      window: records per permuted window (a multiple of `batch_size`: `window_size`).
      seed: the run seed; None draws each window's seed when it runs (copies of the pipeline on
        tf.data service workers with sharding off each produce their own order).
      records_per_epoch: N, when known (else counted by reading epoch 0 once, resumed runs only).
    """
    def permute(epoch, index, block):
        if seed is None:  # op seeds 0, 0: random at run time, not fixed when the graph is built
            key = tf.stack([tf.raw_ops.RandomUniformInt(shape=tf.constant([], tf.int32), minval=tf.constant(0, tf.int64),
                                                        maxval=tf.constant(2**62, tf.int64), seed=0, seed2=0), index])
        else:
            key = _seed(seed, _WINDOWS_STREAM, epoch, index)
        # The permutation of the positions, then one gather: the same order as shuffling the
        # records themselves (the permutation depends on the length and the seed only), for
        # about half the CPU on serialized records (benchmarks/README.md, Tables).
        return tf.gather(block, tf.random.experimental.stateless_shuffle(tf.range(tf.shape(block)[0]), seed=key))

    def numbered(epoch, blocks):  # (epoch, window index, window): what the permutation is keyed by
        return blocks.map(as_written(lambda index, block: (epoch, index, block)))

    def windows(epoch):
        return numbered(epoch, read_epoch(epoch).rebatch(window, drop_remainder=False).enumerate())

    first_epoch = first_window = dropped = tf.constant(0, tf.int64)
    if skip_batches:  # tensors: parameter-server workers trace this
        per_epoch = (tf.constant(records_per_epoch, tf.int64) if records_per_epoch is not None
                     else count_records(read_epoch(tf.constant(0, tf.int64))))
        seen = tf.constant(int(skip_batches) * batch_size, tf.int64)
        first_epoch, offset = seen // tf.maximum(per_epoch, 1), seen % tf.maximum(per_epoch, 1)
        first_window, dropped = offset // window, offset % window
        log.info("resuming the input after %d records: whole epochs skipped, then the records before it in "
                 "its epoch", int(skip_batches) * batch_size)
    first = read_epoch(first_epoch).rebatch(window, drop_remainder=False).enumerate()
    if skip_batches:  # whole windows read and dropped unpermuted (numbered before the skip)
        first = first.skip(first_window)
    rest = tf.data.Dataset.range(first_epoch + 1, _INFINITE).flat_map(as_written(windows))
    # One parallel map over all epochs' windows: inside `flat_map` it started anew and drained
    # at every epoch's end (benchmarks/README.md, Tables).
    ds = numbered(first_epoch, first).concatenate(rest).map(as_written(permute), num_parallel_calls=tf.data.AUTOTUNE)
    if skip_batches:  # records of the landing window that were trained on
        ds = ds.enumerate().map(as_written(lambda i, block: block[tf.where(i == 0, dropped, 0):]))
    return ds


def shuffled_records(cached: tf.data.Dataset, *, buffer: int, seed: int, skip_records: int = 0) -> tf.data.Dataset:
    """The endless stream of decoded records (`data.cache_decoded`) of `cached` (one epoch,
    cached), each epoch shuffled by a `Dataset.shuffle` buffer seeded by the run seed and the
    epoch number, starting after its first `skip_records` records: whole epochs are skipped
    arithmetically, only the records of the landing epoch one by one."""
    first_epoch = offset = tf.constant(0, tf.int64)
    if skip_records:  # tensors: parameter-server workers trace this
        per_epoch = tf.maximum(cached.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1), 1)
        seen = tf.constant(int(skip_records), tf.int64)
        first_epoch, offset = seen // per_epoch, seen % per_epoch

    def epoch(index):  # traced by flat_map, in a function graph of its own
        key = tf.random.stateless_uniform([], seed=_seed(seed, _WINDOWS_STREAM, index), minval=0, maxval=2**62,
                                          dtype=tf.int64)  # one number from the (seed, epoch) pair
        # `Dataset.shuffle` pairs its seed with the graph's seed, the global one
        # (`tf.random.set_seed`; the Estimator sets it from `train.seed`): the order would
        # depend on it, and a global seed of 0 made it test this tensor as a Python bool
        # (OperatorNotAllowedInGraphError). Without one, the order is the run seed's and the epoch's.
        tf.compat.v1.get_default_graph().seed = None
        return cached.shuffle(buffer, seed=key, reshuffle_each_iteration=False)

    # The landing epoch too through flat_map (the skip stays inside it: offset < its records).
    return endless(tf.data.Dataset.range(first_epoch, _INFINITE).flat_map(as_written(epoch)).skip(offset))


def endless(ds: tf.data.Dataset) -> tf.data.Dataset:
    """`ds` (a stream of _INFINITE epochs) declared endless: `flat_map` leaves its cardinality
    unknown, and the train loop then reads each step through an optional and a `cond` (an input
    that may end), about 90 graph nodes per step more than the plain `next` an endless input
    gets (`core.loops.make_train_loop`)."""
    return ds.apply(tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY))
