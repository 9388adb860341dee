"""RunRecorder writes runs that follow every rule of docs/RUN_FORMAT.md (checked on real folders)."""
from __future__ import annotations

import io
import json
import math
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from PIL import Image

from tpuestimator.errors import NonFiniteError
from tpuestimator.runs import RunRecorder, check_run_dir, ls_runs, run_info
from tpuestimator.runs.reading import read_properties

CONFIG = {
    "name": "tiny", "model": "mlp",
    "params": {"learning_rate": 0.01, "hidden": [16, 8], "optimizer": {"name": "adam", "beta1": 0.9},
               "dropout": float("nan"), "schedule": None, "label_smoothing": float("inf")},
    "train": {"batch_size": 32, "max_steps": 300, "steps": None},
    "run": {"strategy": "cpu"},
}


def strict_json(path: Path):
    """Parses like R's jsonlite: NaN / Infinity are errors."""
    def reject(name):
        raise AssertionError(f"{path} holds {name}")
    return json.loads(path.read_text(), parse_constant=reject)


def make_recorder(tmp_path: Path, planned_rows=3, script=None, **kw) -> RunRecorder:
    if script is None:
        script = tmp_path / "tiny.yaml"
        script.write_text("model: mlp\nparams:\n  learning_rate: 0.01\n")
    return RunRecorder.create(tmp_path / "runs", config=CONFIG, flags=CONFIG["params"], script=str(script),
                              planned_rows=planned_rows, **kw)


def test_successful_run_follows_every_rule(tmp_path):
    rec = make_recorder(tmp_path, properties={"samples": 640, "tpu_topology": "2x2"})
    rec.log_metrics(100, {"loss": 0.9, "accuracy": 0.5}, eval_metrics={"loss": 1.0, "accuracy": 0.4, "global_step": 100})
    rec.log_metrics(200, {"loss": 0.5, "accuracy": 0.7}, eval_metrics={"loss": 0.6, "accuracy": 0.65})
    rec.set_properties(model="Model: tiny\n dense (Dense)  (None, 16)", num_replicas=1, device="cpu")
    rec.write_evaluation({"loss": 0.6, "accuracy": 0.65, "global_step": 200})
    export = tmp_path / "export"
    (export / "variables").mkdir(parents=True)
    (export / "saved_model.pb").write_bytes(b"\x08\x01")
    rec.add_artifact(export, "export")
    rec.complete()

    assert check_run_dir(rec.run_dir) == []
    meta = rec.run_dir / "tfruns.d"
    props = read_properties(rec.run_dir)
    assert props["completed"] is True and props["type"] == "training" and props["context"] == "local"
    assert props["script"] == "tiny.yaml"
    # 3 rows planned, 2 recorded: a completed run's epochs are its rows (it reads complete)
    assert props["max_steps"] == 300 and props["epochs"] == 2 and props["batch_size"] == 32 and props["samples"] == 640
    assert props["learning_rate"] == 0.01 and props["optimizer"] == "adam" and props["strategy"] == "cpu"
    assert props["model"].startswith("Model: tiny\n dense")
    assert props["tpu_topology"] == "2x2" and props["global_step"] == 200
    assert props["tensorflow_version"].startswith("2.")
    assert props["start"] <= props["end"] <= time.time() + 1

    # metrics.json: step axis, val_ names, then the training arrays, the fullest last (what
    # tfruns counts); the padding row planned for a third evaluation is gone once complete
    metrics = strict_json(meta / "metrics.json")
    assert list(metrics) == ["epoch", "val_loss", "val_accuracy", "accuracy", "loss"]
    assert metrics["epoch"] == [100, 200]
    assert metrics["val_loss"] == [1.0, 0.6]
    assert {len(v) for v in metrics.values()} == {2}
    assert strict_json(meta / "evaluation.json") == {"loss": 0.6, "accuracy": 0.65}

    with tarfile.open(meta / "source.tar.gz") as tar:
        assert tar.extractfile("source/tiny.yaml").read().decode().startswith("model: mlp")
    assert (rec.run_dir / "export" / "saved_model.pb").read_bytes() == b"\x08\x01"
    for name in ("loss", "accuracy"):
        with Image.open(rec.plots_dir / f"{name}.png") as img:
            assert img.format == "PNG" and img.size[0] > 100
    assert (rec.logs_dir / "train").is_dir() and (rec.logs_dir / "eval").is_dir()
    assert not list(meta.rglob("*.tmp")), "temp files left behind"

    row = ls_runs(tmp_path / "runs")[0]
    assert row["status"] == "completed" and row["completed"] is True
    assert row["epochs_completed"] == 2 and row["eval_accuracy"] == 0.65 and row["metric_val_loss"] == 0.6


def test_flags_from_nested_dicts_lists_nan_and_none(tmp_path):
    rec = make_recorder(tmp_path)
    rec.complete()
    flags = strict_json(rec.run_dir / "tfruns.d" / "flags.json")
    # nested -> dotted keys, lists -> JSON text, None / NaN / Inf left out (R shows NA)
    assert flags == {"learning_rate": 0.01, "hidden": "[16, 8]", "optimizer.name": "adam", "optimizer.beta1": 0.9}
    props = read_properties(rec.run_dir)
    assert props["flags_dropped"] == "dropout (NaN), schedule (None), label_smoothing (Inf)"
    assert check_run_dir(rec.run_dir) == []
    row = ls_runs(tmp_path / "runs")[0]
    assert row["flag_optimizer.beta1"] == 0.9 and row["flag_hidden"] == "[16, 8]"
    assert "flag_dropout" not in row


def test_nan_stopped_run_writes_null_and_no_nan(tmp_path):
    rec = make_recorder(tmp_path, planned_rows=4)
    rec.log_metrics(100, {"loss": 0.8}, eval_metrics={"loss": 0.9})
    rec.log_metrics(200, {"loss": float("nan")}, eval_metrics={"loss": float("inf"), "accuracy": float("-inf")})
    rec.write_evaluation({"loss": float("nan"), "accuracy": 0.3, "auc": None})
    try:
        raise NonFiniteError("loss became NaN at step 200", step=200, what="loss")
    except NonFiniteError as exc:
        rec.fail(exc)

    meta = rec.run_dir / "tfruns.d"
    assert "NaN" not in (meta / "metrics.json").read_text() and "Infinity" not in (meta / "metrics.json").read_text()
    metrics = strict_json(meta / "metrics.json")
    assert metrics["loss"] == [0.8, None, None, None]
    assert metrics["val_accuracy"] == [None, None, None, None]
    # tfruns counts rows on the last array: the one with the most values (a training one) is last
    assert list(metrics)[-1] == "loss" and ls_runs(tmp_path / "runs")[0]["epochs_completed"] == 1
    assert strict_json(meta / "evaluation.json") == {"accuracy": 0.3}
    error = strict_json(meta / "error.json")
    assert error["message"] == "NonFiniteError: loss became NaN at step 200"
    assert isinstance(error["traceback"], list) and "test_nan_stopped_run" in error["traceback"][0]
    assert read_properties(rec.run_dir)["completed"] is False
    assert check_run_dir(rec.run_dir) == []
    assert ls_runs(tmp_path / "runs")[0]["status"] == "failed"


def _train_and_crash():
    raise ValueError("bad batch in input_fn")


def test_failed_run_records_error_and_context_manager(tmp_path):
    with pytest.raises(ValueError):
        with make_recorder(tmp_path, planned_rows=None) as rec:
            rec.log_metrics(10, {"loss": 1.0})
            _train_and_crash()
    assert rec.state == "failed"
    error = strict_json(rec.run_dir / "tfruns.d" / "error.json")
    assert error["message"] == "ValueError: bad batch in input_fn"
    assert any("_train_and_crash" in frame for frame in error["traceback"])
    assert check_run_dir(rec.run_dir) == []
    rec.complete()  # ignored: a failed run stays failed
    assert read_properties(rec.run_dir)["completed"] is False
    info = run_info(rec.run_dir)
    assert info["status"] == "failed" and info["error"]["message"].startswith("ValueError")


def test_live_run_can_be_watched(tmp_path):
    rec = make_recorder(tmp_path, planned_rows=2)
    first_end = read_properties(rec.run_dir)["end"]
    time.sleep(0.01)
    rec.log_metrics(50, {"loss": 0.7})
    props = read_properties(rec.run_dir)
    assert props["end"] > first_end and props["completed"] is False
    assert strict_json(rec.run_dir / "tfruns.d" / "metrics.json")["loss"] == [0.7, None]
    assert ls_runs(tmp_path / "runs")[0]["status"] == "running"  # this process owns it
    assert check_run_dir(rec.run_dir) == []


def test_metric_arrays_stay_equal_length_past_the_plan(tmp_path):
    rec = make_recorder(tmp_path, planned_rows=1)
    rec.log_metrics(1, {"loss": 3.0})
    rec.log_metrics(2, {"loss": 2.0}, eval_metrics={"auc": 0.5})  # a new metric appears late
    rec.log_metrics(3, {"loss": 1.0, "extra": 7})
    assert len(rec.metrics["loss"]) == 3  # the file follows within HEARTBEAT_S, and at the end
    rec.complete()
    metrics = strict_json(rec.run_dir / "tfruns.d" / "metrics.json")
    # val_auc alone would never be charted by tfruns (rule 7): an all-null auc array goes beside it
    assert metrics == {"epoch": [1, 2, 3], "loss": [3.0, 2.0, 1.0], "extra": [None, None, 7.0],
                       "auc": [None, None, None], "val_auc": [None, 0.5, None]}
    assert list(metrics) == ["epoch", "val_auc", "extra", "auc", "loss"]
    assert check_run_dir(rec.run_dir) == []


def test_dict_config_gets_its_yaml_archived(tmp_path):
    rec = RunRecorder.create(tmp_path / "runs", config=CONFIG, flags={"a": 1}, script=None, planned_rows=None)
    rec.complete()
    assert read_properties(rec.run_dir)["script"] == "config.yaml"
    with tarfile.open(rec.run_dir / "tfruns.d" / "source.tar.gz") as tar:
        text = tar.extractfile("source/config.yaml").read().decode()
    assert "learning_rate: 0.01" in text and "dropout: null" in text
    assert check_run_dir(rec.run_dir) == []


def test_add_artifact_refuses_reserved_and_escaping_names(tmp_path):
    rec = make_recorder(tmp_path)
    log = tmp_path / "out.log"
    log.write_text("hello\n")
    assert rec.add_artifact(log, "output.log").read_text() == "hello\n"
    log.write_text("again\n")
    assert rec.add_artifact(log, "output.log").read_text() == "again\n"  # replaced
    for bad in ("tfruns.d/x", "logs", "../escape", "/abs"):
        with pytest.raises(ValueError, match="not allowed"):
            rec.add_artifact(log, bad)
    with pytest.raises(FileNotFoundError):
        rec.add_artifact(tmp_path / "missing.bin")


def test_git_commit_recorded_inside_a_repo(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "f.txt").write_text("x")
    subprocess.run([*git, "-C", str(repo), "add", "f.txt"], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-q", "-m", "init"], check=True)
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    monkeypatch.chdir(repo)
    rec = make_recorder(tmp_path)
    assert read_properties(rec.run_dir)["git_commit"] == head
    monkeypatch.chdir(tmp_path)  # not a repository: no git_commit
    rec2 = RunRecorder.create(tmp_path / "runs2", config={}, flags={}, script="c.yaml", planned_rows=None)
    assert "git_commit" not in read_properties(rec2.run_dir)


def test_attach_keeps_what_tfruns_wrote(tmp_path):
    run_dir = tmp_path / "runs" / "2026-11-29T10-23-38Z"
    props = run_dir / "tfruns.d" / "properties"
    props.mkdir(parents=True)
    (props / "start").write_text("1795947818.5\n")  # as R's writeLines() writes them
    (props / "script").write_text("train.R\n")
    (props / "output").write_text("R console so far\n")  # tfruns's sink() target
    with tarfile.open(run_dir / "tfruns.d" / "source.tar.gz", "w:gz") as tar:
        src = tmp_path / "train.R"
        src.write_text("tpu_train('x.yaml')\n")
        tar.add(src, "source/train.R")
    (run_dir / "tfruns.d" / "flags.json").write_text('{"learning_rate": 0.5}')
    rec = RunRecorder.attach(run_dir, config=CONFIG, flags=CONFIG["params"], script="x.yaml", planned_rows=2)
    rec.log_metrics(10, {"loss": 1.0})
    (run_dir / "output.log").write_text("our log\n")
    rec.complete()
    got = read_properties(run_dir)
    assert got["start"] == 1795947818.5 and got["script"] == "train.R"
    # tfruns owns these in its own run (R/training_run.R, do_training_run()): `completed` turns
    # TRUE only when the whole R script has run, and `output` is the target of its sink()
    assert got["completed"] is False and got["output"] == "R console so far"
    flags = strict_json(run_dir / "tfruns.d" / "flags.json")
    assert flags["learning_rate"] == 0.5 and flags["optimizer.name"] == "adam"
    assert check_run_dir(run_dir) == []
    # Issue 12.5: tfruns's archive keeps the R script AND gains the project's config files.
    with tarfile.open(run_dir / "tfruns.d" / "source.tar.gz") as tar:
        names = sorted(m.name for m in tar.getmembers() if m.isfile())
    assert names == ["source/resolved_config.yaml", "source/train.R", "source/x.yaml"]


KILLED_CHILD = r"""
import sys, time
from tpuestimator.runs import RunRecorder
rec = RunRecorder.create(sys.argv[1], config={"train": {"max_steps": 400, "batch_size": 8}},
                         flags={"lr": 0.1}, script="job.yaml", planned_rows=4)
rec.log_metrics(100, {"loss": 0.9}, eval_metrics={"loss": 1.1})
rec.log_metrics(200, {"loss": 0.6}, eval_metrics={"loss": 0.8})
print(rec.run_dir, flush=True)
time.sleep(60)
"""


def test_killed_run_is_still_listed(tmp_path):
    import tpuestimator.runs

    python_dir = Path(tpuestimator.runs.__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(python_dir))
    child = subprocess.Popen([sys.executable, "-c", KILLED_CHILD, str(tmp_path / "runs")], env=env,
                             stdout=subprocess.PIPE, text=True)
    try:
        run_dir = Path(child.stdout.readline().strip())
        assert ls_runs(tmp_path / "runs")[0]["status"] == "running"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    assert check_run_dir(run_dir) == []
    rows = ls_runs(tmp_path / "runs")
    assert len(rows) == 1
    row = rows[0]
    assert row["completed"] is False and row["status"] == "interrupted"
    assert row["max_steps"] == 400 and row["epochs_completed"] == 2
    assert row["metric_val_loss"] == 0.8 and row["end"] >= row["start"]
    assert not math.isnan(row["end"])


KILLED_AFTER_EVAL = r"""
import os, signal, sys
from tpuestimator.jobs.job import run_job

def kill_after_eval(event, info):
    if event == "after_eval":  # hooks given to run_job run after the job's own
        os.kill(os.getpid(), signal.SIGKILL)

run_job(sys.argv[1], overrides=["eval.every_n_steps=20"], model_dir=sys.argv[2], runs_dir=sys.argv[3],
        hooks=[kill_after_eval], export=False)
"""


def test_a_job_killed_right_after_an_evaluation_keeps_its_row_and_end(tmp_path, fixtures_dir, forked_python):
    """Issue 12.4: the row used to be written after the exporters, so a kill there left metrics.json
    all null and end == start."""
    import tpuestimator.runs

    python_dir = Path(tpuestimator.runs.__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(python_dir), TF_CPP_MIN_LOG_LEVEL="2")
    # forked_python: a process of its own that dies by its SIGKILL, without its TensorFlow import (conftest.py)
    done = subprocess.run([forked_python, "-c", KILLED_AFTER_EVAL, str(fixtures_dir / "parity" / "parity.yaml"),
                           str(tmp_path / "m"), str(tmp_path / "runs")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    row = ls_runs(tmp_path / "runs")[0]
    # a row per loop of 10 steps: the loops to 10 and 20 (with its evaluation), of 4 planned
    assert row["status"] == "interrupted" and row["epochs_completed"] == 2 and row["epochs"] == 4
    assert row["global_step"] == 20 and "metric_epoch" not in row and row["metric_val_loss"] is not None and row["metric_loss"] is not None
    assert row["end"] > row["start"]
    assert check_run_dir(row["run_dir"]) == []


def test_heartbeat_moves_end_between_evaluations(tmp_path, monkeypatch):
    import tpuestimator.runs.record as record

    monkeypatch.setattr(record, "HEARTBEAT_S", 0.0)
    rec = make_recorder(tmp_path)
    start = read_properties(rec.run_dir)["end"]
    time.sleep(0.01)
    rec.heartbeat(50)
    props = read_properties(rec.run_dir)
    assert props["end"] > start and props["global_step"] == 50


def test_property_files_end_with_a_newline_and_the_archive_has_no_pax_headers(tmp_path):
    """Issue 12.3: R warned "incomplete final line" per property file and per read, and
    "using pax extended headers" on every view."""
    rec = make_recorder(tmp_path)
    rec.set_properties(model="Model: tiny\n dense", note="x")
    rec.complete(plots=False)
    for prop in (rec.run_dir / "tfruns.d" / "properties").iterdir():
        assert prop.read_text().endswith("\n"), prop.name
    archive = rec.run_dir / "tfruns.d" / "source.tar.gz"
    import gzip

    raw = gzip.decompress(archive.read_bytes())
    assert b"PaxHeader" not in raw and raw[156:157] != b"x"
    with tarfile.open(archive) as tar:
        assert all(not m.pax_headers and float(m.mtime).is_integer() for m in tar.getmembers())
    # and the validator catches both
    (rec.run_dir / "tfruns.d" / "properties" / "note").write_text("x")
    pax = io.BytesIO()
    with tarfile.open(fileobj=pax, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("source/tiny.yaml")
        info.size, info.mtime = 1, 1.5
        tar.addfile(info, io.BytesIO(b"x"))
    archive.write_bytes(pax.getvalue())
    problems = check_run_dir(rec.run_dir)
    assert any("properties/note: no final newline" in p for p in problems)
    assert any("pax extended headers" in p for p in problems)


def test_a_long_run_keeps_a_bounded_curve_and_reads_complete(tmp_path):
    """Issue 22.3: a row per loop, thinned past MAX_TRAIN_ROWS; evaluations and the last row kept;
    the row count matches the plan, so tfruns reads the finished run as complete."""
    from tpuestimator.runs.metric_rows import MAX_TRAIN_ROWS, planned_row_count

    loops, evals = 1000, {250, 500, 1000}
    rec = make_recorder(tmp_path, planned_rows=planned_row_count(loops, evals))
    for i in range(1, loops + 1):
        rec.log_metrics(i * 10, {"loss": 1.0 / i})
        if i in evals:
            rec.log_metrics(i * 10, {"loss": 1.0 / i}, eval_metrics={"loss": 2.0 / i})
    rec.complete()
    metrics = strict_json(rec.run_dir / "tfruns.d" / "metrics.json")
    assert MAX_TRAIN_ROWS // 2 < len(metrics["epoch"]) <= MAX_TRAIN_ROWS + len(evals)
    assert metrics["epoch"][-1] == loops * 10 and metrics["loss"][-1] == 1.0 / loops
    assert [s for s, v in zip(metrics["epoch"], metrics["val_loss"]) if v is not None] == [2500, 5000, 10000]
    assert None not in metrics["loss"] and metrics["epoch"] == sorted(metrics["epoch"])
    row = ls_runs(tmp_path / "runs")[0]
    assert row["epochs"] == row["epochs_completed"] == len(metrics["epoch"])
    assert check_run_dir(rec.run_dir) == []
