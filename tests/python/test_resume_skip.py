"""Issue 19 item 10: a resumed training's input jumps to its position at a cost that does not
grow with the epochs already done (whole epochs are skipped arithmetically, tpuestimator.data.epochs),
and still reads exactly the batches an uninterrupted run reads."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tpuestimator.data import make_input_fn

FIX = Path(__file__).resolve().parents[1] / "fixtures"
# 12 records in one file; windows of 8 records (2 batches of 4): epochs, windows and batches all
# end at different records, so every kind of boundary is crossed
MNIST = {"format": "mnist", "train": str(FIX / "mnist_good.tfrecord"), "image": {"height": 8, "width": 8, "channels": 1},
         "shuffle_buffer": 6}
BATCH = 4


def _batches(start_step, n, section=MNIST):
    fn = make_input_fn(section, "train")
    ds = fn({"batch_size": BATCH, "seed": 3, "start_step": start_step, "num_replicas": 1})
    return [(f["image"].numpy(), lab.numpy()) for f, lab in ds.take(n)]


@pytest.mark.parametrize("variant", [{}, {"cache": True}, {"cache_decoded": True}], ids=["files", "cache", "cache_decoded"])
def test_a_resumed_input_reads_the_batches_of_the_uninterrupted_one_at_every_position(variant):
    section = {**MNIST, **variant}
    whole = _batches(0, 40, section)   # 160 records: 13 epochs of 12
    labels = [lab.tolist() for _, lab in whole]
    assert labels[:3] != labels[3:6]   # epochs come in different orders
    for start in ((1, 3, 7, 11, 29, 36) if not variant else (3, 11, 29)):
        resumed = _batches(start, 4, section)
        for (image, label), (image_ref, label_ref) in zip(resumed, whole[start:start + 4]):
            np.testing.assert_array_equal(label, label_ref, err_msg=f"start_step={start}")
            np.testing.assert_array_equal(image, image_ref, err_msg=f"start_step={start}")


def test_a_resume_ten_billion_records_in_reads_at_most_two_epochs():
    """The built-in pipeline at step 2.5e9 (10^10 records: 8e8 epochs of 12) gives its batch (a
    record-by-record skip would read 10^10 records first), and the stream's reads, counted, stay
    under two epochs whatever the epoch."""
    image, label = _batches(2_500_000_000, 1)[0]
    assert image.shape == (BATCH, 8, 8, 1) and label.shape == (BATCH,)

    from tpuestimator.data.epochs import shuffled_batches

    records, reads = 20, []

    def read_epoch(epoch):   # 20 records per epoch, each read counted
        def count(i):
            reads.append(int(i))
            return tf.strings.as_string(i)
        return tf.data.Dataset.range(records).map(
            lambda i: tf.py_function(count, [i], tf.string)).batch(3)

    def stream(skip):
        return shuffled_batches(read_epoch, window=8, batch_size=4, seed=1, skip_batches=skip)

    whole = [b.numpy().tolist() for b in stream(0).take(1010)]   # 202 epochs, read in order
    for skip in (5, 500, 1000):   # 1, 100 and 200 epochs in
        reads.clear()
        resumed = [b.numpy().tolist() for b in stream(skip).take(10)]
        assert resumed == whole[skip:skip + 10]
        assert len(reads) <= 2 * records + 8 + 10 * 4, (skip, len(reads))   # count + landing epoch + what was read


@pytest.mark.parametrize("variant", [{}, {"cache_decoded": True}], ids=["files", "cache_decoded"])
def test_the_stream_does_not_depend_on_the_global_seed(variant):
    """The Estimator sets TensorFlow's global seed from `train.seed`; the training stream is a
    function of the run seed alone (`data.cache_decoded` shuffled with `Dataset.shuffle`, which
    pairs its seed with the global one, and failed on a global seed of 0)."""
    section = {**MNIST, **variant}
    want = [_batches(start, 6, section) for start in (0, 11)]
    try:
        for global_seed in (0, 7):
            tf.random.set_seed(global_seed)
            for start, batches in zip((0, 11), want):
                for (image, label), (image_ref, label_ref) in zip(_batches(start, 6, section), batches):
                    np.testing.assert_array_equal(label, label_ref, err_msg=f"global seed {global_seed}")
                    np.testing.assert_array_equal(image, image_ref, err_msg=f"global seed {global_seed}")
    finally:
        tf.random.set_seed(None)
