"""The input pipeline on the seed formats and typed features (real TF, tiny data)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tpuestimator.data import (
    describe_features,
    encode,
    make_input_fn,
    num_classes,
    parse_serialized,
    vocabulary,
    write_tfrecords,
)
from tpuestimator.errors import DataError

FIX = Path(__file__).resolve().parents[1] / "fixtures"
REPO = Path(__file__).resolve().parents[2]
MNIST = {"format": "mnist", "train": str(FIX / "mnist_good.tfrecord"), "eval": str(FIX / "mnist_good.tfrecord"),
         "image": {"height": 8, "width": 8, "channels": 1}}
FLOWERS = {"format": "flowers", "train": str(FIX / "flowers_good.tfrecord"),
           "eval": str(FIX / "flowers_good.tfrecord"), "image": {"height": 6, "width": 5, "channels": 3}}


def raw_mnist():
    out = []
    for rec in tf.data.TFRecordDataset(str(FIX / "mnist_good.tfrecord")):
        ex = tf.train.Example.FromString(rec.numpy())
        pixels = np.frombuffer(ex.features.feature["image_raw"].bytes_list.value[0], np.uint8)
        out.append((pixels.reshape(8, 8, 1), ex.features.feature["label"].int64_list.value[0]))
    return out


def collect(ds):
    images, labels, sizes = [], [], []
    for features, lab in ds:
        images.append(features["image"].numpy())
        labels.append(lab.numpy())
        sizes.append(len(lab))
    return np.concatenate(images), np.concatenate(labels), sizes


@pytest.mark.quick("data")
def test_eval_reads_seed002_records_unmodified_once_with_partial_last_batch():
    images, labels, sizes = collect(make_input_fn(MNIST, "eval")({"batch_size": 5}))
    raw = raw_mnist()
    assert sizes == [5, 5, 2]
    np.testing.assert_allclose(images, np.stack([p for p, _ in raw]) / 255.0, atol=1e-6)
    assert labels.dtype == np.int32 and labels.tolist() == [lab for _, lab in raw]


def test_train_batches_are_static_repeated_and_shuffled():
    ds = make_input_fn(MNIST, "train")({"batch_size": 5, "seed": 3})
    image_spec, label_spec = ds.element_spec[0]["image"], ds.element_spec[1]
    assert image_spec.shape.as_list() == [5, 8, 8, 1] and label_spec.shape.as_list() == [5]
    images, labels, sizes = collect(ds.take(6))  # 30 > 12 records: repeats
    assert sizes == [5] * 6
    assert sorted(labels[:12].tolist()) != labels[:12].tolist()  # not file order
    assert np.bincount(labels, minlength=3).min() >= 8


@pytest.mark.parametrize("extra", [{}, {"augment": {"flip_left_right": True, "brightness": 0.2, "contrast": [0.5, 1.5]}},
                                   {"cache_decoded": True, "augment": {"flip_left_right": True, "brightness": 0.2}},
                                   {**FLOWERS, "augment": {"random_crop": True, "flip_left_right": True,
                                                           "brightness": 0.25, "contrast": [0.2, 1.8]}}],
                         ids=["plain", "augmented", "cache_decoded", "flowers_augmented"])
def test_start_step_positions_the_seeded_stream_exactly(extra):
    """Issue 13.7: a resumed training's input (start_step = the checkpoint's step) continues the
    uninterrupted run's stream: same records, same augmentation (keyed by position), not a reseeded order."""
    fn = make_input_fn({**MNIST, **extra}, "train")

    def batches(n, **params):
        return [(f["image"].numpy(), lab.numpy()) for f, lab in fn({"batch_size": 4, "seed": 1, **params}).take(n)]

    whole = batches(10)
    for start, replicas in ((0, 1), (6, 1), (3, 2)):  # 2 replicas: each step took 2 batches from this pipeline
        resumed = batches(10 - start * replicas, start_step=start, num_replicas=replicas)
        for (image, label), (image_ref, label_ref) in zip(resumed, whole[start * replicas:], strict=True):
            np.testing.assert_array_equal(image, image_ref)
            np.testing.assert_array_equal(label, label_ref)
    assert fn.skips_to_start_step  # skipped before decoding, not by the Estimator after it
    other_seed = [lab.numpy().tolist() for _, lab in fn({"batch_size": 4, "seed": 2}).take(3)]
    assert other_seed != [lab.tolist() for _, lab in whole[:3]]


def test_window_shuffle_permutes_each_window_reproducibly():
    from tpuestimator.data.epochs import shuffled_batches

    def read_epoch(epoch):  # 64 records per epoch, in chunks of 5
        return tf.data.Dataset.range(64).map(lambda i: tf.strings.as_string(i)).batch(5)

    def order(seed):
        return [v for b in shuffled_batches(read_epoch, window=32, batch_size=8, seed=seed).take(16)
                for v in b.numpy().tolist()]

    first = order(1)  # windows of 32 records (4 batches of 8), two per epoch
    assert len(first) == 128 and sorted(first[:32]) == sorted(str(i).encode() for i in range(32))
    assert first[:32] != [str(i).encode() for i in range(32)]
    assert sorted(first[64:96]) == sorted(first[:32]) and first[64:96] != first[:32]  # next epoch: another order
    assert order(1) == first and order(2) != first


def test_symmetric_scale_and_transpose():
    section = {**MNIST, "image": {**MNIST["image"], "scale": "symmetric"}, "transpose_input": True}
    features, _ = next(iter(make_input_fn(section, "train")({"batch_size": 4, "seed": 0})))
    assert features["image"].shape == (8, 8, 1, 4)
    assert features["image"].numpy().min() >= -1.0 and features["image"].numpy().max() <= 1.0
    assert features["image"].numpy().min() < -0.5


def test_seed000_flowers_records_jpeg_and_png_label_offset():
    images, labels, sizes = collect(make_input_fn(FLOWERS, "eval")({"batch_size": 4}))
    assert sizes == [4, 2] and images.shape == (6, 6, 5, 3)
    assert labels.tolist() == [0, 1, 2, 0, 1, 2]  # stored from 1, label_offset 1 by default
    assert 0.0 <= images.min() and images.max() <= 1.0


def test_flowers_train_augmentation_keeps_static_shapes():
    section = {**FLOWERS, "image": {**FLOWERS["image"], "scale": "symmetric"},
               "augment": {"random_crop": True, "flip_left_right": True, "brightness": 0.25, "contrast": [0.2, 1.8]}}
    ds = make_input_fn(section, "train")({"batch_size": 4, "seed": 0})
    assert ds.element_spec[0]["image"].shape.as_list() == [4, 6, 5, 3]
    images, _, _ = collect(ds.take(3))
    assert images.min() >= -1.0 and images.max() <= 1.0
    plain, _, _ = collect(make_input_fn({**section, "augment": {}}, "train")({"batch_size": 4, "seed": 0}).take(3))
    assert not np.allclose(images, plain)
    cached = make_input_fn({**section, "cache_decoded": True}, "train")({"batch_size": 4, "seed": 0})
    assert cached.element_spec[0]["image"].shape.as_list() == [4, 6, 5, 3]
    images, labels, _ = collect(cached.take(5))  # 20 > 6 records: decoded once, augmented every epoch
    assert images.min() >= -1.0 and images.max() <= 1.0 and sorted(set(labels.tolist())) == [0, 1, 2]


def test_cache_and_cache_decoded_give_the_same_eval_data():
    base = collect(make_input_fn(MNIST, "eval")({"batch_size": 5}))
    for flag in ("cache", "cache_decoded"):
        got = collect(make_input_fn({**MNIST, flag: True}, "eval")({"batch_size": 5}))
        np.testing.assert_array_equal(got[0], base[0])
        assert got[2] == base[2]
    ds = make_input_fn({**MNIST, "cache_decoded": True}, "train")({"batch_size": 5, "seed": 0})
    assert ds.element_spec[0]["image"].shape.as_list() == [5, 8, 8, 1]
    assert len(list(ds.take(4))) == 4


def test_input_context_shards_files(tmp_path):
    for i in range(4):
        with tf.io.TFRecordWriter(str(tmp_path / f"part-{i}.tfrecord")) as w:
            for j in range(3):
                w.write(encode.mnist_example(np.full((2, 2, 1), i * 10 + j, np.uint8), i))
    section = {"format": "mnist", "eval": str(tmp_path / "part-*.tfrecord"),
               "image": {"height": 2, "width": 2, "channels": 1}}
    seen = []
    for pid in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pid, num_replicas_in_sync=2)
        _, labels, _ = collect(make_input_fn(section, "eval")({"batch_size": 4, "input_context": ctx}))
        seen.append(sorted(set(labels.tolist())))
    assert seen == [[0, 2], [1, 3]]  # whole files per pipeline, disjoint, covering all


def test_features_format_dtypes_and_describe(tmp_path):
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    manifest = write_tfrecords({"x": x, "n": np.arange(6)}, tmp_path / "out", labels=[0, 1, 2, 0, 1, 2], split=0)
    section = {"manifest": manifest["path"]}
    assert describe_features(section) == {"x": ((4,), tf.float32), "n": ((), tf.int32)}
    assert num_classes(section) == 3 and vocabulary(section) == ["0", "1", "2"]
    features, labels = next(iter(make_input_fn(section, "predict")({"batch_size": 6})))  # predict falls back to train
    assert set(features) == {"x", "n"} and features["n"].dtype == tf.int32
    order = np.argsort(features["n"].numpy())
    np.testing.assert_array_equal(features["x"].numpy()[order], x)
    assert labels.numpy()[order].tolist() == [0, 1, 2, 0, 1, 2]


def test_vocabulary_from_text_file_and_describe_images(tmp_path):
    (tmp_path / "labels.txt").write_text("cat\ndog\n\n")
    section = {**FLOWERS, "vocabulary": str(tmp_path / "labels.txt")}
    assert vocabulary(section) == ["cat", "dog"] and num_classes(section) == 2
    assert describe_features(section) == {"image": ((6, 5, 3), tf.float32)}
    with pytest.raises(DataError, match="does not exist"):
        vocabulary({**FLOWERS, "vocabulary": str(tmp_path / "nope.txt")})


def test_parse_serialized_matches_eval_pipeline():
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(FIX / "mnist_good.tfrecord")).take(3)]
    features = parse_serialized(MNIST, tf.constant(records))
    images, _, _ = collect(make_input_fn(MNIST, "eval")({"batch_size": 3}).take(1))
    np.testing.assert_array_equal(features["image"].numpy(), images)


def test_predict_mode_reads_records_without_labels(tmp_path):
    path = tmp_path / "nolabel.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as w:
        for i in range(3):
            w.write(encode.example_bytes({"image_raw": ("string", bytes([i]) * 64)}))
    section = {**MNIST, "eval": str(path)}
    features, labels = next(iter(make_input_fn(section, "predict")({"batch_size": 4})))
    assert features["image"].shape == (3, 8, 8, 1) and labels.numpy().tolist() == [-1, -1, -1]


def test_importing_the_data_package_and_command_does_not_import_tensorflow():
    code = ("import sys; import tpuestimator.data, tpuestimator.commands.data, tpuestimator.examples; "
            "assert 'tensorflow' not in sys.modules, 'tensorflow imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO,
                   env={"PYTHONPATH": str(REPO / "python"), "PATH": "/usr/bin:/bin"})


def test_a_small_evaluation_input_declares_it_fits_in_memory_and_jpeg_or_large_ones_do_not(monkeypatch):
    """The evaluation and prediction inputs of records up to IN_MEMORY_EVAL_BYTES declare
    `fits_in_memory` (the Estimator then reads them once a job); training never does, nor JPEG
    records (they decode to many times their size), nor files over the bound."""
    from tpuestimator.data import pipeline

    size = (FIX / "mnist_good.tfrecord").stat().st_size
    assert [make_input_fn(MNIST, mode).fits_in_memory for mode in ("train", "eval", "predict")] == [False, True, True]
    assert make_input_fn(FLOWERS, "eval").fits_in_memory is False
    monkeypatch.setattr(pipeline, "IN_MEMORY_EVAL_BYTES", size - 1)
    assert make_input_fn(MNIST, "eval").fits_in_memory is False
    monkeypatch.setattr(pipeline, "IN_MEMORY_EVAL_BYTES", size)
    assert make_input_fn(MNIST, "eval").fits_in_memory is True
