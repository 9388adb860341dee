"""Bad data fails fast with a DataError naming the file, the record and the feature.

The cases come from tests/fixtures/bad_data.json, which the R suite reads too.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tpuestimator.data import (
    corrupt_records_skipped,
    count_corrupt,
    encode,
    make_input_fn,
    num_examples,
    translate_errors,
)
from tpuestimator.data.diagnose import scan_file
from tpuestimator.data.spec import resolve_section
from tpuestimator.errors import DataError

FIX = Path(__file__).resolve().parents[1] / "fixtures"
CASES = json.loads((FIX / "bad_data.json").read_text())["cases"]


def resolve(fragment: dict) -> dict:
    section = dict(fragment)
    for key in ("train", "eval"):
        section[key] = str(FIX / section[key])
    return section


def drain(section: dict, mode: str, batches: int = 20) -> int:
    """Builds and iterates the pipeline the way the core does; returns the records seen."""
    n = 0
    with translate_errors(section, mode):
        ds = make_input_fn(section, mode)({"batch_size": 4, "seed": 0})
        for _, labels in ds.take(batches):
            n += int(labels.shape[0])
    return n


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_bad_data_raises_data_error_naming_the_record(case):
    section = resolve(case["data"])
    start = time.monotonic()
    with pytest.raises(DataError) as info:
        drain(section, case["mode"])
    assert time.monotonic() - start < 30  # never a hang
    err = info.value
    assert case["error"] in str(err)
    assert err.record == case["record"]
    assert err.feature == case["feature"]
    if case["name"] not in ("no_files", "empty"):
        assert err.path and err.path.endswith(case["data"]["eval"])
    assert "\n" not in str(err) and "{{function_node" not in str(err)


def test_corrupt_record_found_during_training_names_file_and_index():
    # the first record is fine, so the error surfaces mid-iteration (DataLossError) and is re-diagnosed
    section = resolve({"format": "mnist", "train": "corrupt.tfrecord", "eval": "corrupt.tfrecord",
                       "image": {"height": 8, "width": 8, "channels": 1}})
    with pytest.raises(DataError, match=r"corrupt\.tfrecord: record 5 is corrupt") as info:
        drain(section, "train")
    assert isinstance(info.value.__cause__, tf.errors.DataLossError)


def test_a_data_error_keeps_no_iterator_alive():
    """The DataError, still held (as a notebook or R keeps the last error), holds no iterator:
    the one that read the bad record is freed at once. Freed late, by a garbage collection, it
    could stall the process for up to a minute (core.workarounds.drop_tensorflow_frame_locals)."""
    import weakref

    section = resolve({"format": "mnist", "train": "corrupt.tfrecord", "eval": "corrupt.tfrecord",
                       "image": {"height": 8, "width": 8, "channels": 1}})
    refs = []

    def read(ds):
        iterator = iter(ds)
        refs.append(weakref.ref(iterator))
        try:
            for _ in iterator:
                pass
        finally:
            del iterator  # the caller's own reference; what is left is the error's

    with pytest.raises(DataError, match=r"record 5 is corrupt") as info:
        with translate_errors(section, "train"):
            read(make_input_fn(section, "train")({"batch_size": 4, "seed": 0}))
    assert isinstance(info.value.__cause__, tf.errors.DataLossError)
    assert refs[0]() is None, "the iterator that read the bad record lives as long as the error"


def test_on_corrupt_skip_reads_the_good_part_and_counts():
    section = resolve({"format": "mnist", "train": "corrupt.tfrecord", "eval": "corrupt.tfrecord",
                       "image": {"height": 8, "width": 8, "channels": 1}, "on_corrupt": "skip"})
    section["eval"] = [section["eval"], str(FIX / "truncated.tfrecord"), str(FIX / "mnist_good.tfrecord")]
    assert drain(section, "eval") == 5 + 7 + 12  # records before each corruption point, then the good file
    assert drain(section, "train", batches=10) == 40  # repeats without hanging
    assert corrupt_records_skipped(section, "eval") == 2
    assert corrupt_records_skipped() >= 1  # files registered by the skipping pipelines of this process
    found = count_corrupt(section["eval"])
    assert found["records"] == 24 and set(found["corrupt_files"].values()) == {5, 7}


def test_label_assertion_uses_params_num_classes_without_vocabulary():
    section = resolve({"format": "mnist", "train": "mislabelled.tfrecord", "eval": "mislabelled.tfrecord",
                       "image": {"height": 8, "width": 8, "channels": 1}})
    with pytest.raises(DataError, match="record 4 has a label out of range"):
        with translate_errors(section, "eval", num_classes=3):
            for _ in make_input_fn(section, "eval")({"batch_size": 8, "num_classes": 3}):
                pass
    # without a class count, labels are not checked
    assert sum(int(labels.shape[0]) for _, labels in make_input_fn(section, "eval")({"batch_size": 8})) == 8


def test_assertions_min_max_finite_shape(tmp_path):
    path = tmp_path / "v.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as w:
        for i in range(5):
            v = np.full(3, float(i), np.float32)
            if i == 2:
                v[1] = np.nan
            w.write(encode.example_bytes({"v": ("float32", v), "label": ("int64", [0])}))
    base = {"format": "features", "eval": str(path), "features": {"v": {"dtype": "float32", "shape": [3]}},
            "label": "label"}
    with pytest.raises(DataError, match="record 2 fails data.assertions: feature 'v' must be finite"):
        drain({**base, "assertions": [{"feature": "v", "finite": True}]}, "eval")
    with pytest.raises(DataError, match=r"record 4 fails data.assertions: feature 'v' must be <= 3.*\[4 4 4\]"):
        drain({**base, "assertions": [{"feature": "v", "max": 3}]}, "eval")
    assert drain({**base, "assertions": [{"feature": "v", "min": 0, "shape": [3]}]}, "eval") == 5
    with pytest.raises(DataError, match="feature 'nope' is not one the model receives"):
        drain({**base, "assertions": [{"feature": "nope", "min": 0}]}, "eval")


def test_unreadable_jpeg_in_a_record_is_named(tmp_path):
    path = tmp_path / "f.tfrecord"
    good = tf.io.encode_png(tf.zeros([4, 4, 3], tf.uint8)).numpy()
    with tf.io.TFRecordWriter(str(path)) as w:
        for i in range(3):
            w.write(encode.flowers_example(b"not an image" if i == 1 else good, 1))
    section = {"format": "flowers", "eval": str(path), "image": {"height": 4, "width": 4}}
    with pytest.raises(DataError, match=r"record 1 cannot be decoded as format 'flowers'") as info:
        drain(section, "eval")
    assert info.value.record == 1


def test_scan_file_passes_good_files_and_num_examples():
    section = resolve_section(resolve({"format": "mnist", "train": "mnist_good.tfrecord",
                                       "eval": "mnist_good.tfrecord", "image": {"height": 8, "width": 8}}))
    assert scan_file(section, section.eval, num_classes=3) is None
    assert num_examples(section, "train") == 12
    parity = {"manifest": str(FIX / "parity" / "manifest.json")}
    assert num_examples(parity, "train") == 96 and num_examples(parity, "eval") == 24


def test_errors_not_from_the_data_pass_through_unchanged():
    section = resolve({"format": "mnist", "train": "mnist_good.tfrecord", "eval": "mnist_good.tfrecord",
                       "image": {"height": 8, "width": 8}})
    with pytest.raises(tf.errors.InvalidArgumentError):
        with translate_errors(section, "eval"):
            tf.reshape(tf.zeros([3]), [2])
    assert os.path.exists(section["eval"])


def test_a_training_job_stops_with_the_data_error(tmp_path):
    from tpuestimator.jobs.job import run_job

    case = next(c for c in CASES if c["name"] == "negative_pixel")
    config = {"name": "bad", "model": "linear", "params": {"learning_rate": 0.01}, "data": resolve(case["data"]),
              "train": {"batch_size": 4, "max_steps": 20, "iterations_per_loop": 10, "save_checkpoints_steps": 10},
              "eval": {"batch_size": 4}, "export": {"enabled": False}}
    with pytest.raises(DataError, match=case["error"]) as info:
        run_job(config, model_dir=str(tmp_path / "m"), runs_dir=str(tmp_path / "runs"), export=False)
    assert (info.value.record, info.value.feature) == (3, "pixels")
