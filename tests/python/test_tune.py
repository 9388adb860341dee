"""Tuning runs (issue 12): every combination is a separate training with its own model dir,
from the library and from `tpuestimator tune` (tests/fixtures/parity: a 3-class linear model)."""
from __future__ import annotations

import random

import pytest

from tpuestimator.commands.tune import parse_grid
from tpuestimator.config_flags import override_text
from tpuestimator.jobs.tune import flag_grid, sample_grid
from tpuestimator.runs import check_run_dir, ls_runs


def test_grid_order_sampling_and_parsing():
    grid = flag_grid({"a": [1, 2], "b": ["x", "y"]})
    assert grid == [{"a": 1, "b": "x"}, {"a": 2, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "y"}]  # expand.grid
    assert len(sample_grid(grid, 0.5, random.Random(3))) == 2
    assert sample_grid(grid, 1) == grid
    with pytest.raises(ValueError, match="sample"):
        sample_grid(grid, 1.5)
    assert parse_grid(["params.learning_rate=1e-3,3e-3"]) == {"params.learning_rate": ["1e-3", "3e-3"]}
    with pytest.raises(ValueError, match="KEY=V1,V2"):
        parse_grid(["params.learning_rate"])
    assert override_text("params.learning_rate", 0.001) == "params.learning_rate=0.001"
    assert override_text("model", "cnn") == "model=cnn"


def test_cli_tune_trains_three_different_runs(tmp_path, fixtures_dir, capsys):
    from tpuestimator.cli import main

    runs_dir = tmp_path / "runs"
    config = str(fixtures_dir / "parity" / "parity.yaml")
    code = main(["tune", config, "--grid", "params.learning_rate=0.001,0.03,0.3", "--set", "train.max_steps=10",
                 "--runs-dir", str(runs_dir), "--no-export"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "tuning run 3/3: params.learning_rate=0.3" in out and "3 run(s) trained" in out
    rows = ls_runs(runs_dir)
    assert len(rows) == 3
    assert sorted(r["flag_learning_rate"] for r in rows) == [0.001, 0.03, 0.3]
    # Each is its own training: 10 steps from scratch in its own model dir, three different losses.
    assert {r["global_step"] for r in rows} == {10}
    assert all(r.get("resumed_from_step") is None for r in rows)
    assert len({r["model_dir"] for r in rows}) == 3
    assert len({round(r["eval_loss"], 6) for r in rows}) == 3
    assert len({r["tuning_run"] for r in rows}) == 1
    assert all(check_run_dir(r["run_dir"]) == [] for r in rows)


def test_a_grid_field_the_config_lacks_is_named_with_the_valid_fields_before_any_run(tmp_path, fixtures_dir,
                                                                                     capsys):
    """Issue 19.11: `--grid nosuch.field=1,2` said "Received: nosuch='nosuch'" once per
    combination, after starting each training."""
    from tpuestimator.cli import main
    from tpuestimator.errors import ConfigError
    from tpuestimator.jobs.tune import tuning_run

    config = str(fixtures_dir / "parity" / "parity.yaml")
    runs_dir = tmp_path / "runs"
    assert main(["tune", config, "--grid", "nosuch.field=1,2", "--runs-dir", str(runs_dir)]) == 2
    captured = capsys.readouterr()
    assert "Received" not in captured.err and "tuning run" not in captured.out
    assert "`nosuch.field` is not a known config field" in captured.err
    assert "at the top level, one of data, debug, eval, export, model, name, params, predict, run, train" \
        in captured.err and "--grid nosuch.field=" in captured.err
    assert main(["tune", config, "--grid", "train.max_step=1,2", "--runs-dir", str(runs_dir)]) == 2
    assert "did you mean `max_steps`?" in capsys.readouterr().err
    # A short name without its section is matched against every section's fields.
    assert main(["tune", config, "--grid", "learnin_rate=0.1,0.2", "--runs-dir", str(runs_dir)]) == 2
    assert "did you mean `params.learning_rate`?" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="in `train`, one of async_checkpoint") as caught:
        tuning_run(config, {"train.nosuch": [1, 2]}, runs_dir=str(runs_dir))
    assert caught.value.field == "train.nosuch"
    assert not runs_dir.exists()   # nothing trained, nothing recorded
    from tpuestimator.config import check_field, load_config

    check_field("params.my_own_setting")  # params take any name: a model function's own parameter
    with pytest.raises(ConfigError, match="named by --set run.strateg=") as caught:
        load_config(config, ["run.strateg=cpu"])
    assert "Received" not in str(caught.value) and "did you mean `strategy`?" in str(caught.value)


@pytest.mark.real_process
def test_a_signal_stops_tune_and_the_same_command_continues_it(tmp_path, fixtures_dir, python_env, forked_python):
    """Issue 19.6: SIGTERM stops `tpuestimator tune` at a checkpoint of the current
    combination (recorded interrupted, exit 143); the same command then trains only the
    combinations not finished, the interrupted one resumed from its checkpoint. 800 steps a
    combination (2000 before): the signal comes at the second one's first checkpoint (step 100),
    with 700 steps still ahead of it. forked_python: both commands are real processes (the
    signal, the exit status) without their TensorFlow import (conftest.py)."""
    import signal
    import subprocess

    runs_dir = tmp_path / "runs"
    max_steps = 800
    command = [forked_python, "-m", "tpuestimator", "tune", str(fixtures_dir / "parity" / "parity.yaml"),
               "--grid", "params.learning_rate=0.01,0.03,0.1", "--set", f"train.max_steps={max_steps}",
               "--set", "train.iterations_per_loop=20", "--set", "train.save_checkpoints_steps=100",
               "--runs-dir", str(runs_dir), "--no-export"]
    first = subprocess.Popen(command, env=python_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, sent = [], False
    for line in first.stdout:
        lines.append(line.rstrip("\n"))
        # the second combination is training (it saved a checkpoint): stop there
        if not sent and "tuning run 2/3: params.learning_rate=0.03" in lines and line.startswith("saved checkpoint"):
            first.send_signal(signal.SIGTERM)
            sent = True
    assert first.wait(timeout=600) == 143 and sent, lines[-30:]
    assert "tuning run 3/3" not in "\n".join(lines)
    rows = {r["flag_learning_rate"]: r for r in ls_runs(runs_dir)}
    assert rows[0.01]["status"] == "completed" and rows[0.03]["status"] == "interrupted", rows
    interrupted_step = int(rows[0.03]["global_step"])
    assert 0 < interrupted_step < max_steps

    again = subprocess.run(command, env=python_env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "continuing the tuning" in again.stdout and "1 of 3 combination(s) finished" in again.stdout
    assert "tuning run 1/3" not in again.stdout and "tuning run 3/3" in again.stdout
    runs = ls_runs(runs_dir)
    assert len(runs) == 4   # 1 completed, 1 interrupted, its continuation, the third
    assert len({r["tuning_run"] for r in runs}) == 1
    done = {r["flag_learning_rate"]: r for r in runs if r["status"] == "completed"}
    assert sorted(done) == [0.01, 0.03, 0.1] and all(int(r["global_step"]) == max_steps for r in done.values())
    assert int(done[0.03]["resumed_from_step"]) >= interrupted_step
    assert not [p for p in (runs_dir / ".models").iterdir() if p.name.startswith("tuning-")]   # state removed


def test_quiet_tensorflow_drops_retracing_warnings_and_can_be_undone(caplog):
    """Issue 12.6: a session running many jobs (a tuning loop, an R session) is not buried in
    TensorFlow's "triggered tf.function retracing" warnings."""
    import logging

    from tpuestimator.system.console import quiet_tensorflow

    tf_logger = logging.getLogger("tensorflow")
    try:
        quiet_tensorflow()
        with caplog.at_level(logging.WARNING):
            tf_logger.warning("5 out of the last 5 calls to <function f> triggered tf.function retracing.")
        assert "retracing" not in caplog.text
        assert tf_logger.getEffectiveLevel() == logging.ERROR
    finally:
        quiet_tensorflow(False)
    assert tf_logger.level == logging.NOTSET and not tf_logger.filters
