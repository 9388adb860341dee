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
    from tpuestimator.jobs.job import run_job

    config = str(fixtures_dir / "parity" / "parity.yaml")
    runs_dir = tmp_path / "runs"
    result = run_job(config, overrides=["eval.every_n_steps=20"], model_dir=str(tmp_path / "m1"),
                     runs_dir=str(runs_dir))
    assert check_run_dir(result.run_dir) == []
    info = run_info(result.run_dir)
    assert info["status"] == "completed" and info["properties"]["script"] == "parity.yaml"
    props = info["properties"]
    assert props["max_steps"] == 40 and props["global_step"] == 40 and props["epochs"] == 2
    assert "resumed_from_step" not in props
    # Property names against tfruns's own (R/ls_runs.R run_record(), return_runs()): no 'steps'
    # (tfruns would count rows against it, rule 12); none that tfruns computes itself and would
    # overwrite or that would read as an eval_/metric_/flag_ column; the typed ones hold what
    # R's as.integer()/as.numeric() read.
    assert "steps" not in props
    computed = {"run_dir", "metrics", "source_code", "error_message", "error_traceback", "steps_completed",
                "epochs_completed", "source"}
    assert not computed & set(props) and not [p for p in props if p.startswith(("eval_", "metric_", "flag_"))]
    assert {"type", "context", "script", "start", "end", "completed", "output", "model", "optimizer",
            "learning_rate", "batch_size", "epochs"} <= set(props)
    assert props["type"] == "training" and props["context"] == "local" and props["model"].startswith("Model")
    assert all(isinstance(props[k], int) for k in ("epochs", "batch_size"))
    metrics = info["metrics"]
    # Issue 12.2: the global step is tfruns's x axis ('epoch', not charted), training accuracy is
    # recorded beside val_accuracy, and the rows are counted against 'epochs' (2/2, not 2/40).
    assert list(metrics) == ["epoch", "loss", "accuracy", "val_loss", "val_accuracy"]
    assert metrics["epoch"] == [20, 40] and len(metrics["val_loss"]) == 2
    assert all(0.0 <= a <= 1.0 for a in metrics["accuracy"])
    assert info["row"]["epochs_completed"] == info["row"]["epochs"] == 2
    # Issue 12.2: the console output is where tfruns's Output tab reads it.
    assert "Recording run in" in props["output"] or props["output"].strip()
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


def test_a_model_dir_is_never_silently_reused_with_other_settings(tmp_path, fixtures_dir):
    """Issue 12.1: the second run with another learning rate used to restore the first run's
    checkpoint, train nothing and record the first run's metrics as its own."""
    from tpuestimator.jobs.job import run_job
    from tpuestimator.jobs.modeldir import ModelDirConflictError

    config = str(fixtures_dir / "parity" / "parity.yaml")
    model_dir, runs_dir = str(tmp_path / "m"), str(tmp_path / "runs")
    first = run_job(config, overrides=["train.max_steps=20"], model_dir=model_dir, runs_dir=runs_dir, export=False)
    with pytest.raises(ModelDirConflictError) as caught:
        run_job(config, overrides=["train.max_steps=20", "params.learning_rate=0.01"], model_dir=model_dir,
                runs_dir=runs_dir, export=False)
    message = str(caught.value)
    assert "params.learning_rate: 0.1 -> 0.01" in message and "step 20" in message
    assert "--resume" in message and "warm_start_from" in message and "new model dir" in message
    assert caught.value.differences == {"params.learning_rate": (0.1, 0.01)}
    # A checkpoint past max_steps would train nothing: refused too (the training_run(max_steps=100)
    # after max_steps=200 case).
    with pytest.raises(ModelDirConflictError, match="past train.max_steps=10"):
        run_job(config, overrides=["train.max_steps=10"], model_dir=model_dir, runs_dir=runs_dir, export=False)
    # Same settings, longer: resumes, and says so.
    resumed = run_job(config, overrides=["train.max_steps=30"], model_dir=model_dir, runs_dir=runs_dir,
                      export=False)
    assert resumed.global_step == 30
    assert run_info(resumed.run_dir)["properties"]["resumed_from_step"] == 20
    # --resume continues anyway, and records it.
    forced = run_job(config, overrides=["train.max_steps=40", "params.learning_rate=0.01"], model_dir=model_dir,
                     runs_dir=runs_dir, export=False, resume=True)
    assert forced.global_step == 40
    assert run_info(forced.run_dir)["properties"]["resumed_from_step"] == 30
    assert first.metrics["loss"] != forced.metrics["loss"]
