"""Errors that used to arrive late or as tracebacks (issue 13, failures 5 and 6), on the digits example.

- checked up front, before anything is written: a model function that cannot be imported (before
  TensorFlow even starts), batch sizes that do not split over 8 replicas, labels out of range in
  the eval (or train) data;
- found at run time and named: an eval label out of range past the up-front scan's size limit,
  `evaluate --data` / `predict` on a truncated TFRecord, `predict` on an empty or broken PNG;
- (a full disk: test_disk_full.py.)
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

from helpers import one_clear_error
from tpuestimator.errors import ConfigError, DataError

REPO = Path(__file__).resolve().parents[2]
DIGITS = REPO / "python" / "tpuestimator" / "examples" / "digits"
TINY = ["--set", "train.iterations_per_loop=10", "--set", "train.save_checkpoints_steps=10",
        "--set", "eval.every_n_steps=10"]


def _digits(tmp: Path) -> Path:
    shutil.copytree(DIGITS, tmp / "digits")
    return tmp / "digits" / "digits.yaml"


def _write_bad_labels(src: Path, dest: Path, index: int, label: int) -> None:
    records = list(tf.data.TFRecordDataset(str(src)).as_numpy_iterator())
    example = tf.train.Example.FromString(records[index])
    example.features.feature["label"].int64_list.value[:] = [label]
    records[index] = example.SerializeToString()
    with tf.io.TFRecordWriter(str(dest)) as writer:
        for record in records:
            writer.write(record)


def _cli(python: str, args: list[str], env: dict, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-m", "tpuestimator", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


# ---------------------------------------------------------------- up front, nothing written
# a fresh `python` (not conftest's forked_python, whose runs have TensorFlow imported already):
# what is tested is that TensorFlow is not imported
def test_unimportable_model_fails_before_tensorflow_starts_and_writes_nothing(tmp_path, python_env):
    config = _digits(tmp_path)
    script = ("import sys; from tpuestimator.cli import main; rc = main(sys.argv[1:]); "
              "assert 'tensorflow' not in sys.modules, 'TensorFlow was imported'; sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", script, "train", str(config), "--set", "model=nosuchmodule:build",
                           "--runs-dir", "runs", "--model-dir", "m"], env=python_env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    one_clear_error(proc, 2, "`model`", "nosuchmodule:build", "cnn, dnn, image_classifier, linear, mlp, wide_and_deep", "PYTHONPATH")
    assert not (tmp_path / "runs").exists() and not (tmp_path / "m").exists()


def test_model_module_without_the_function_lists_what_it_defines(tmp_path, monkeypatch):
    from tpuestimator.models import resolve_model_fn

    (tmp_path / "mymodels.py").write_text("def build(params):\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"a function `buld` defined in module `mymodels` \(it defines: build\)"):
        resolve_model_fn("mymodels:buld")
    (tmp_path / "brokenmodels.py").write_text("import nosuchdependency\n")
    with pytest.raises(ConfigError, match="importing it failed: No module named 'nosuchdependency'"):
        resolve_model_fn("brokenmodels:build")


@pytest.mark.parametrize("field,value", [("train.batch_size", 60), ("eval.batch_size", 36)])
def test_batch_not_divisible_by_8_replicas_fails_before_anything_is_written(tmp_path, field, value):
    from tpuestimator.jobs.job import run_job

    config = _digits(tmp_path)
    overrides = ["run.strategy=mirrored", "run.num_cpu_devices=8", f"{field}={value}"]
    with pytest.raises(ConfigError, match=rf"`{field}` is invalid.*a multiple of the replica count \(8, mirrored\)"):
        run_job(str(config), overrides=overrides, model_dir=str(tmp_path / "m"), runs_dir=str(tmp_path / "runs"))
    assert not (tmp_path / "runs").exists() and not (tmp_path / "m").exists()


def test_eval_label_out_of_range_fails_before_training_naming_file_and_record(tmp_path):
    from tpuestimator.jobs.job import run_job

    config = _digits(tmp_path)
    _write_bad_labels(DIGITS / "eval.tfrecord", tmp_path / "digits" / "badeval.tfrecord", 7, 12)
    with pytest.raises(DataError, match=r"badeval.tfrecord: record 7 has a label out of range: label=12; labels "
                                        r"must lie in \[0, 10\).*Nothing was trained") as info:
        run_job(str(config), overrides=["data.eval=badeval.tfrecord"], model_dir=str(tmp_path / "m"),
                runs_dir=str(tmp_path / "runs"))
    assert (info.value.record, info.value.feature) == (7, "label")
    assert not (tmp_path / "runs").exists() and not (tmp_path / "m").exists()


@pytest.mark.slow
def test_eval_label_error_past_the_scan_limit_names_file_and_record(tmp_path, monkeypatch):
    """Eval data too large for the up-front scan: the first evaluation's error still names the record."""
    from tpuestimator.data import labels
    from tpuestimator.jobs.job import run_job

    config = _digits(tmp_path)
    _write_bad_labels(DIGITS / "eval.tfrecord", tmp_path / "digits" / "badeval.tfrecord", 7, 12)
    monkeypatch.setattr(labels, "MAX_SCAN_BYTES", 0)
    with pytest.raises(DataError, match="badeval.tfrecord: record 7 has a label out of range") as info:
        run_job(str(config), overrides=["data.eval=badeval.tfrecord", "train.max_steps=10",
                                        "train.iterations_per_loop=10", "train.save_checkpoints_steps=10",
                                        "eval.every_n_steps=10"],
                model_dir=str(tmp_path / "m"), runs_dir=str(tmp_path / "runs"))
    assert (info.value.record, info.value.feature) == (7, "label")
    assert info.value.path.endswith("badeval.tfrecord")


# ---------------------------------------------------------------- evaluate / predict on bad files
@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from tpuestimator.jobs.job import run_job

    work = tmp_path_factory.mktemp("trained")
    config = _digits(work)
    result = run_job(str(config), overrides=["train.max_steps=10", "train.iterations_per_loop=10",
                                             "train.save_checkpoints_steps=10", "eval.every_n_steps=10",
                                             "export.exporters=[final]"],
                     model_dir=str(work / "m"), record=False)
    data = (DIGITS / "eval.tfrecord").read_bytes()
    (work / "trunc.tfrecord").write_bytes(data[:20000])
    (work / "empty.png").write_bytes(b"")
    (work / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really a png")
    return work, result


# `evaluate` and `predict` each run once as a real command (exit code and stderr as a shell sees
# them; forked_python: without the process's TensorFlow import, ~6 CPU s); the image cases call `cli.main` in this process, which returns that code and prints
# the same lines, without a TensorFlow start each.
IN_PROCESS = {"predict_empty_png", "predict_broken_png"}


@pytest.mark.slow
@pytest.mark.parametrize("case", ["evaluate_truncated", "predict_truncated", "predict_empty_png",
                                  "predict_broken_png"])
def test_bad_files_give_one_data_error_exit_2(trained, python_env, forked_python, case, monkeypatch, capsys):
    work, result = trained
    args, needles = {
        "evaluate_truncated": (["evaluate", "m", "--data", "trunc.tfrecord"],
                               ["trunc.tfrecord: record 170 is corrupt or truncated"]),
        "predict_truncated": (["predict", result.export_dir, "trunc.tfrecord"],
                              ["trunc.tfrecord: record 170 is corrupt or truncated"]),
        "predict_empty_png": (["predict", result.export_dir, "empty.png"],
                              ["empty.png: cannot be decoded as an image (the file is empty)"]),
        "predict_broken_png": (["predict", result.export_dir, "broken.png"],
                               ["broken.png: cannot be decoded as an image (Invalid PNG"]),
    }[case]
    if case in IN_PROCESS:
        from tpuestimator.cli import main

        monkeypatch.chdir(work)
        code = main(args)
        captured = capsys.readouterr()
        proc = subprocess.CompletedProcess(args, code, captured.out, captured.err)
    else:
        proc = _cli(forked_python, args, python_env, work)
    one_clear_error(proc, 2, *needles)
