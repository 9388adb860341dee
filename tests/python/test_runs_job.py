"""End to end: the real training job (tests/fixtures/parity, 40 steps of a linear model) records
valid tfruns runs, for a completed job and for a job stopped by a NaN loss."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tpuestimator.errors import NonFiniteError
from tpuestimator.runs import check_run_dir, ls_runs, run_info
from tpuestimator.runs.report import render_run_report


def test_training_job_records_valid_runs(tmp_path, fixtures_dir):
    from tpuestimator.job import run_job

    config = str(fixtures_dir / "parity" / "parity.yaml")
    runs_dir = tmp_path / "runs"
    result = run_job(config, overrides=["eval.every_n_steps=20"], model_dir=str(tmp_path / "m1"),
                     runs_dir=str(runs_dir))
    assert check_run_dir(result.run_dir) == []
    info = run_info(result.run_dir)
    assert info["status"] == "completed" and info["properties"]["script"] == "parity.yaml"
    assert info["properties"]["steps"] == 40 and info["properties"]["global_step"] == "40"
    metrics = info["metrics"]
    assert metrics["step"] == [20, 40] and len(metrics["val_loss"]) == 2
    assert info["evaluation"]["loss"] == pytest.approx(result.metrics["loss"])
    assert info["flags"]["learning_rate"] == 0.1
    assert any(p.endswith("loss.png") for p in info["plots"])
    assert list((Path(result.run_dir) / "logs" / "train").glob("events.out.tfevents.*"))
    assert "<svg" in render_run_report(info)

    with pytest.raises(NonFiniteError):
        run_job(config, overrides=["params.learning_rate=1e38"], model_dir=str(tmp_path / "m2"),
                runs_dir=str(runs_dir))
    rows = ls_runs(runs_dir)
    assert [r["status"] for r in rows] == ["failed", "completed"]
    failed = rows[0]
    assert failed["error_message"].startswith("NonFiniteError") and failed["completed"] is False
    assert check_run_dir(failed["run_dir"]) == []
    text = (Path(failed["run_dir"]) / "tfruns.d" / "metrics.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    json.loads(text)
