"""Issue 19 item 8: a corrupt, truncated, empty or wrongly shaped training or eval file is found
before the job writes anything (no model dir, no run record): the preflight scan reads the framing
and the first records of EVERY file, and names the file and the record. Bounded per file."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tpuestimator.errors import DataError

FIX = Path(__file__).resolve().parents[1] / "fixtures"
IMAGE = {"height": 8, "width": 8, "channels": 1}
# fixture -> (record named, feature named); in each the bad record comes after good ones
BAD = {"corrupt": (5, None), "truncated": (7, None), "wrong_shape": (2, "image_raw"),
       "missing_feature": (None, None)}


def _config(tmp_path, train_dir, eval_file=FIX / "mnist_good.tfrecord"):
    return {"name": "scan", "model": "linear", "params": {"learning_rate": 0.01},
            "data": {"format": "mnist", "train": str(train_dir / "*.tfrecord"), "eval": str(eval_file),
                     "image": IMAGE, "vocabulary": ["zero", "one", "two"]},
            "train": {"batch_size": 4, "max_steps": 10_000, "iterations_per_loop": 10,
                      "save_checkpoints_steps": 10},
            "eval": {"batch_size": 4}, "export": {"enabled": False}}


def _shards(tmp_path, bad: str) -> Path:
    """Two good shards, then the bad one (the pipeline reaches it only after the good ones)."""
    folder = tmp_path / "train"
    folder.mkdir()
    for name in ("a", "b"):
        shutil.copy(FIX / "mnist_good.tfrecord", folder / f"{name}_good.tfrecord")
    shutil.copy(FIX / f"{bad}.tfrecord", folder / f"z_{bad}.tfrecord")
    return folder


def _run(tmp_path, config):
    from tpuestimator.jobs.job import run_job

    return run_job(config, model_dir=str(tmp_path / "model"), runs_dir=str(tmp_path / "runs"), export=False)


def _nothing_written(tmp_path):
    assert not (tmp_path / "model").exists()
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("bad", sorted(BAD))
def test_a_bad_training_file_stops_the_job_before_it_writes_anything(tmp_path, bad):
    folder = _shards(tmp_path, bad)
    with pytest.raises(DataError) as info:
        _run(tmp_path, _config(tmp_path, folder))
    record, feature = BAD[bad]
    assert info.value.path == str(folder / f"z_{bad}.tfrecord")
    assert f"z_{bad}.tfrecord" in str(info.value)
    if record is not None:
        assert info.value.record == record and f"record {record}" in str(info.value)
    if feature is not None:
        assert info.value.feature == feature
    _nothing_written(tmp_path)


def test_a_bad_eval_file_stops_the_job_before_it_writes_anything(tmp_path):
    folder = tmp_path / "train"
    folder.mkdir()
    shutil.copy(FIX / "mnist_good.tfrecord", folder / "good.tfrecord")
    with pytest.raises(DataError, match=r"truncated\.tfrecord: record 7 is corrupt or truncated"):
        _run(tmp_path, _config(tmp_path, folder, eval_file=FIX / "truncated.tfrecord"))
    _nothing_written(tmp_path)


def test_only_empty_training_files_stop_the_job_and_one_empty_shard_does_not_fail_the_scan(tmp_path):
    from tpuestimator.data.scan import scan_files

    folder = tmp_path / "train"
    folder.mkdir()
    shutil.copy(FIX / "empty.tfrecord", folder / "empty.tfrecord")
    with pytest.raises(DataError, match="are empty") as info:
        _run(tmp_path, _config(tmp_path, folder))
    assert info.value.path == str(folder / "empty.tfrecord")
    _nothing_written(tmp_path)
    shutil.copy(FIX / "mnist_good.tfrecord", folder / "good.tfrecord")
    assert scan_files(_config(tmp_path, folder)["data"], "train") == 2


def test_the_scan_is_bounded_to_the_first_records_of_each_file(tmp_path):
    """corrupt.tfrecord's flipped byte is in record 5: a scan of 5 records per file passes it
    (the pipeline names it when it gets there); a scan of 6 finds it."""
    from tpuestimator.data.scan import scan_files

    section = _config(tmp_path, _shards(tmp_path, "corrupt"))["data"]
    assert scan_files(section, "train", records=5) == 3
    with pytest.raises(DataError, match="record 5 is corrupt"):
        scan_files(section, "train", records=6)
    assert scan_files(dict(section, on_corrupt="skip"), "train") == 3


def test_train_table_does_not_read_back_the_records_it_has_just_written_and_run_job_does(tmp_path, monkeypatch):
    """A table's records are written from the frame's checked columns in the same call: the
    preflight's read of them is skipped there (docs/tables.md), and made by a job on the same
    config (a file damaged since stops it, named, before anything is written)."""
    import numpy as np
    import pandas as pd

    from tpuestimator import data
    from tpuestimator.jobs.job import run_job
    from tpuestimator.tables import table_config, train_table

    reads = []
    for name in ("scan_files", "check_labels"):
        real = getattr(data, name)
        monkeypatch.setattr(data, name, lambda *a, _real=real, _name=name, **k: reads.append((_name, a[1])) or
                            _real(*a, **k))
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.normal(size=40), "y": rng.integers(0, 2, size=40)})
    result = train_table(frame, label="y", out_dir=tmp_path / "t", model="linear", early_stopping=False,
                         config={"train": {"batch_size": 8, "max_steps": 3}}, record=False)
    assert result.global_step == 3 and reads == []
    cfg = table_config(str(tmp_path / "t" / "data" / "manifest.json"), model="linear",
                       config={"train": {"batch_size": 8, "max_steps": 3}})
    run_job(cfg, model_dir=str(tmp_path / "again"), record=False, export=False)
    assert sorted(reads) == [("check_labels", "eval"), ("check_labels", "train"), ("scan_files", "eval"),
                             ("scan_files", "train")]
    shard = next((tmp_path / "t" / "data").rglob("*eval*.tfrecord"))
    shard.write_bytes(shard.read_bytes()[:-3])   # truncated inside its last record
    with pytest.raises(DataError, match=shard.name):
        run_job(cfg, model_dir=str(tmp_path / "third"), record=False, export=False)
    assert not (tmp_path / "third").exists()
    # a config's own data.assertions are checked on the first records before anything is trained
    reads.clear()
    with pytest.raises(DataError, match="data.assertions: feature 'x' must be <= -100"):
        train_table(frame, label="y", out_dir=tmp_path / "asserted", model="linear", early_stopping=False,
                    config={"train": {"batch_size": 8, "max_steps": 3},
                            "data": {"assertions": [{"feature": "x", "max": -100}]}}, record=False)
    assert ("scan_files", "train") in reads and not list((tmp_path / "asserted" / "model").glob("ckpt-*"))
    reads.clear()   # the same, set by an override (the config the job resolves, not the dict passed)
    with pytest.raises(DataError, match="data.assertions: feature 'x' must be <= -100"):
        train_table(frame, label="y", out_dir=tmp_path / "overridden", model="linear", early_stopping=False,
                    config={"train": {"batch_size": 8, "max_steps": 3}}, record=False,
                    overrides=["data.assertions=[{feature: x, max: -100}]"])
    assert ("scan_files", "train") in reads and not list((tmp_path / "overridden" / "model").glob("ckpt-*"))
