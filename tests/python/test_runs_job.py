"""End to end: the real training job (tests/fixtures/parity, 40 steps of a linear model) records
valid tfruns runs, for a completed job and for a job stopped by a NaN loss."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tpuestimator.errors import NonFiniteError
from tpuestimator.runs import check_run_dir, ls_runs, run_info
from tpuestimator.runs.report import render_run_report

NUMBER = r"\d+\.\d{4}"
RATE = r"\d+(\.\d+)?"


def assert_job_log(text: str, model_dir: str, metrics: dict) -> None:
    """The log of the parity job (40 steps, loops of 10, evaluations and checkpoints at 20 and
    40): each line matches its hand-written pattern; the losses and accuracies logged at the
    loops are the ones metrics.json records, a row per loop (4 decimals); the train lines after
    step 20's evaluation carry its loss (`eval loss`)."""
    def fmt(name, row):
        return re.escape(f"{metrics[name][row]:.4f}")

    def train(step, loss=NUMBER, accuracy=NUMBER, eval_loss=None):
        # after an evaluation, the latest one's loss stands beside the training loss
        held_out = "" if eval_loss is None else rf" \| eval loss: {eval_loss}"
        return (rf"INFO tpuestimator\.hooks\.builtin: train \| step: {step:>7} \| loss: {loss}{held_out} "
                rf"\| steps/sec: {RATE} \| examples/sec: {RATE} \| accuracy: {accuracy}")

    def evaluation(step, row):
        return (rf"INFO tpuestimator\.hooks\.builtin: eval  \| step: {step:>7} \| loss: {fmt('val_loss', row)} "
                rf"\| accuracy: {fmt('val_accuracy', row)} \| num_examples: 24")

    def saved(step):
        return rf"INFO tpuestimator\.core\.checkpointing: saved checkpoint {re.escape(model_dir)}/ckpt-{step}"

    expected = [train(10, fmt("loss", 0), fmt("accuracy", 0)), train(20, fmt("loss", 1), fmt("accuracy", 1)),
                saved(20), evaluation(20, 1), train(30, fmt("loss", 2), fmt("accuracy", 2), fmt("val_loss", 1)),
                train(40, fmt("loss", 3), fmt("accuracy", 3), fmt("val_loss", 1)), saved(40), evaluation(40, 3)]
    assert text.endswith("\n")
    lines = text.splitlines()
    assert len(lines) == len(expected), text
    for line, pattern in zip(lines, expected):
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} " + pattern, line), f"{line!r} !~ {pattern!r}"


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
    assert props["max_steps"] == 40 and props["global_step"] == 40 and props["epochs"] == 4
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
    # recorded beside val_accuracy, and the rows are counted against 'epochs' (4/4, not 4/40).
    # Issue 22.3: a row per training loop (the curve), val_ values at the two evaluations only.
    assert list(metrics) == ["epoch", "val_loss", "val_accuracy", "accuracy", "loss"]
    assert metrics["epoch"] == [10, 20, 30, 40]
    assert metrics["val_loss"][0] is None and metrics["val_loss"][2] is None
    assert None not in (metrics["val_loss"][1], metrics["val_loss"][3])
    assert None not in metrics["loss"] and all(0.0 <= a <= 1.0 for a in metrics["accuracy"])
    assert info["row"]["epochs_completed"] == info["row"]["epochs"] == 4
    # Issue 12.2: the console output is where tfruns's Output tab reads it: the job's log, line
    # for line (issue 24.6: exactly these lines; only times and rates vary between runs).
    log_text = (Path(result.run_dir) / "output.log").read_text()
    assert props["output"].rstrip("\n") == log_text.rstrip("\n")
    assert_job_log(log_text, str(tmp_path / "m1"), metrics)
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
