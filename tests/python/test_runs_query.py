"""ls_runs / latest_run / run_info / resolve_run / clean_runs, and check_run_dir catching each broken rule."""
from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from tpuestimator.runs import (
    RunNotFoundError,
    RunRecorder,
    check_run_dir,
    clean_runs,
    latest_run,
    ls_runs,
    resolve_run,
    run_info,
)
from tpuestimator.runs.validate import check_runs_dir


def make_run(runs_dir: Path, name: str, *, lr: float, acc: float | None, status: str = "completed",
             model: str = "mlp") -> Path:
    """A real run made by RunRecorder, renamed to `name` (so tests need not wait a second per run)."""
    tmp = runs_dir.parent / f"scratch-{name}"
    rec = RunRecorder.create(tmp, config={"model": model, "train": {"max_steps": 20, "batch_size": 4}},
                             flags={"learning_rate": lr, "model": model}, script="job.yaml", planned_rows=2)
    rec.log_metrics(10, {"loss": 1.0}, eval_metrics={"accuracy": 0.5})
    if acc is not None:
        rec.log_metrics(20, {"loss": 0.5}, eval_metrics={"accuracy": acc})
        rec.write_evaluation({"accuracy": acc, "loss": 0.5})
    if status == "completed":
        rec.complete(plots=False)
    elif status == "failed":
        rec.fail(RuntimeError("boom"), plots=False)
    runs_dir.mkdir(parents=True, exist_ok=True)
    os.rename(rec.run_dir, runs_dir / name)
    return runs_dir / name


@pytest.fixture
def runs(tmp_path) -> Path:
    runs_dir = tmp_path / "runs"
    make_run(runs_dir, "2026-11-29T10-00-01Z", lr=0.1, acc=0.7)
    make_run(runs_dir, "2026-11-29T10-00-02Z", lr=0.01, acc=0.9, model="cnn")
    make_run(runs_dir, "2026-11-29T10-00-03Z", lr=0.5, acc=None, status="failed")
    return runs_dir


@pytest.mark.quick("runs")
def test_ls_runs_columns_and_default_order(runs):
    rows = ls_runs(runs)
    assert [Path(r["run_dir"]).name for r in rows] == ["2026-11-29T10-00-03Z", "2026-11-29T10-00-02Z",
                                                       "2026-11-29T10-00-01Z"]
    newest_ok = rows[1]
    assert newest_ok["run_dir"] == os.path.join(str(runs), "2026-11-29T10-00-02Z")
    assert newest_ok["eval_accuracy"] == 0.9 and newest_ok["metric_loss"] == 0.5
    assert "metric_epoch" not in newest_ok  # the x axis: tfruns skips it (R/ls_runs.R run_record())
    assert newest_ok["flag_learning_rate"] == 0.01 and newest_ok["flag_model"] == "cnn"
    assert newest_ok["max_steps"] == 20 and newest_ok["epochs"] == 2 and newest_ok["epochs_completed"] == 2
    assert newest_ok["batch_size"] == 4 and newest_ok["completed"] is True and newest_ok["status"] == "completed"
    assert isinstance(newest_ok["start"], float) and newest_ok["end"] >= newest_ok["start"]
    assert newest_ok["type"] == "training" and newest_ok["script"] == "job.yaml"
    failed = rows[0]
    assert failed["status"] == "failed" and failed["error_message"] == "RuntimeError: boom"
    assert failed["epochs_completed"] == 1 and failed["eval_accuracy"] is None


def test_ls_runs_latest_n_order_and_filter(runs):
    assert [Path(r["run_dir"]).name for r in ls_runs(runs, latest_n=2)] == ["2026-11-29T10-00-03Z",
                                                                           "2026-11-29T10-00-02Z"]
    by_acc = ls_runs(runs, order="eval_accuracy")
    assert [r.get("eval_accuracy") for r in by_acc] == [0.9, 0.7, None]  # missing values last
    assert [r.get("eval_accuracy") for r in ls_runs(runs, order="eval_accuracy", decreasing=False)] == [0.7, 0.9, None]
    assert [r["flag_model"] for r in ls_runs(runs, filter={"model": "cnn"})] == ["cnn"]
    assert len(ls_runs(runs, filter=["learning_rate=0.1"])) == 1  # text parsed as a number
    assert len(ls_runs(runs, filter="status=failed")) == 1
    assert len(ls_runs(runs, filter=lambda r: r.get("eval_accuracy", 0) > 0.8)) == 1
    assert ls_runs(runs, filter={"no_such_column": 1}) == []
    assert ls_runs(runs.parent / "none") == []


def test_latest_run_and_resolve_run(runs):
    assert Path(latest_run(runs)["run_dir"]).name == "2026-11-29T10-00-03Z"
    assert resolve_run("latest", runs).name == "2026-11-29T10-00-03Z"
    assert resolve_run("2026-11-29T10-00-01Z", runs).name == "2026-11-29T10-00-01Z"
    assert resolve_run(str(runs / "2026-11-29T10-00-02Z"), runs).name == "2026-11-29T10-00-02Z"
    assert resolve_run("2026-11-29T10-00-02", runs).name == "2026-11-29T10-00-02Z"  # unique prefix
    with pytest.raises(RunNotFoundError, match="matches 3 runs"):
        resolve_run("2026-11-29T10", runs)
    with pytest.raises(RunNotFoundError, match="'nope' not found"):
        resolve_run("nope", runs)
    with pytest.raises(RunNotFoundError, match="no runs"):
        resolve_run("latest", runs.parent / "empty")
    assert latest_run(runs.parent / "empty") is None


def test_run_info(runs):
    (runs / "2026-11-29T10-00-02Z" / "output.log").write_text("step 10 loss 1.0\n")
    info = run_info("2026-11-29T10-00-02Z", runs)
    assert info["status"] == "completed" and info["flags"]["model"] == "cnn"
    assert info["metrics"]["val_accuracy"] == [0.5, 0.9]
    assert info["evaluation"] == {"accuracy": 0.9, "loss": 0.5}
    assert info["error"] is None and info["duration"] >= 0
    assert info["output"] == "step 10 loss 1.0\n" and "output.log" in info["artifacts"]
    assert "job.yaml" in info["source"]


def test_clean_runs_moves_to_archive(runs):
    moved = clean_runs(["2026-11-29T10-00-01Z"], runs)
    assert moved == [runs / "archive" / "2026-11-29T10-00-01Z"]
    assert moved[0].joinpath("tfruns.d").is_dir()
    assert len(ls_runs(runs)) == 2
    clean_runs(runs_dir=runs)
    assert ls_runs(runs) == [] and len(list((runs / "archive").iterdir())) == 3


# --------------------------------------------------------------------------- the validator fails on broken runs
def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


BREAKAGES = {
    "nan in metrics": (lambda m: _write(m / "metrics.json", '{"step": [1], "loss": [NaN]}'), "NaN"),
    "infinity in evaluation": (lambda m: _write(m / "evaluation.json", '{"loss": Infinity}'), "Infinity"),
    "null flag": (lambda m: _write(m / "flags.json", '{"lr": null}'), "rule 4"),
    "nested flag": (lambda m: _write(m / "flags.json", '{"opt": {"beta1": 0.9}}'), "rule 5"),
    "list flag": (lambda m: _write(m / "flags.json", '{"layers": [1, 2]}'), "rule 5"),
    "null evaluation": (lambda m: _write(m / "evaluation.json", '{"auc": null}'), "rule 4"),
    "evaluation array": (lambda m: _write(m / "evaluation.json", "[0.1, 0.2]"), "rule 6"),
    "unequal arrays": (lambda m: _write(m / "metrics.json", '{"loss": [1, 2], "val_loss": [1]}'), "rule 7"),
    "string in metrics": (lambda m: _write(m / "metrics.json", '{"loss": ["x"]}'), "non-numbers"),
    "no start": (lambda m: (m / "properties" / "start").unlink(), "properties/start: missing"),
    "no end": (lambda m: (m / "properties" / "end").unlink(), "properties/end: missing"),
    "no script": (lambda m: (m / "properties" / "script").unlink(), "rule 2"),
    "bad completed": (lambda m: _write(m / "properties" / "completed", "yes"), "TRUE or FALSE"),
    "non-integer steps": (lambda m: _write(m / "properties" / "steps", "1e3.5"), "not an integer"),
    "truncated json": (lambda m: _write(m / "metrics.json", '{"loss": [1, 2'), "invalid JSON"),
    "bad error.json": (lambda m: _write(m / "error.json", '["boom"]'), "error.json"),
}


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_check_run_dir_reports_each_broken_rule(tmp_path, breakage):
    run_dir = make_run(tmp_path / "runs", "2026-11-29T10-00-01Z", lr=0.1, acc=0.7)
    assert check_run_dir(run_dir) == []
    breaker, expected = BREAKAGES[breakage]
    breaker(run_dir / "tfruns.d")
    problems = check_run_dir(run_dir)
    assert problems and any(expected in p for p in problems), problems
    assert list(check_runs_dir(tmp_path / "runs")) == ["2026-11-29T10-00-01Z"]


def test_check_run_dir_source_archive_and_name(tmp_path):
    run_dir = make_run(tmp_path / "runs", "2026-11-29T10-00-01Z", lr=0.1, acc=0.7)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b"other"
        info = tarfile.TarInfo("source/other.yaml")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    (run_dir / "tfruns.d" / "source.tar.gz").write_bytes(buf.getvalue())
    assert any("has no source/job.yaml" in p for p in check_run_dir(run_dir))
    (run_dir / "tfruns.d" / "source.tar.gz").write_bytes(b"not a tar")
    assert any("not a gzipped tar" in p for p in check_run_dir(run_dir))
    renamed = run_dir.with_name("my-run")
    os.rename(run_dir, renamed)
    assert any("not a UTC start time" in p for p in check_run_dir(renamed))
    assert check_run_dir(tmp_path) == [f"{tmp_path}: no tfruns.d/ folder, so it is not a run"]


def test_ls_runs_survives_a_broken_run(runs):
    (runs / "2026-11-29T10-00-01Z" / "tfruns.d" / "metrics.json").write_text("{broken")
    rows = ls_runs(runs)
    assert len(rows) == 3 and rows[2]["metric_loss"] is None
    assert json.dumps(rows)  # every value is JSON-able
