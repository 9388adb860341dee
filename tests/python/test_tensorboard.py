"""A real TensorBoard on a run folder: scalars and hparams over HTTP, stopped without leftovers."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tpuestimator.commands.tensorboard import resolve_targets
from tpuestimator.runs import RunRecorder
from tpuestimator.runs.tensorboard import TensorBoardError, logdir_arguments, start_tensorboard


@pytest.fixture(autouse=True)
def _tensorboard_installed():
    import importlib.util

    if importlib.util.find_spec("tensorboard") is None:
        message = "the tensorboard package is not installed (pip install tensorboard)"
        if os.environ.get("TPUESTIMATOR_FORCE_TESTS") == "1":
            pytest.fail(message + "; TPUESTIMATOR_FORCE_TESTS=1 turns this skip into a failure")
        pytest.skip(message)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def make_run(runs_dir: Path, lr: float) -> RunRecorder:
    import tensorflow as tf

    flags = {"learning_rate": lr, "optimizer": {"name": "adam"}, "dropout": None}
    rec = RunRecorder.create(runs_dir, config={}, flags=flags, script="job.yaml", planned_rows=2)
    for kind, scale in (("train", 1.0), ("eval", 1.2)):
        writer = tf.summary.create_file_writer(str(rec.logs_dir / kind))
        with writer.as_default():
            for step in (10, 20):
                tf.summary.scalar("loss", scale / step, step=step)
        writer.close()
    rec.log_metrics(10, {"loss": 0.1}, eval_metrics={"loss": 0.12})
    rec.log_metrics(20, {"loss": 0.05}, eval_metrics={"loss": 0.06})
    from tpuestimator.hooks.hparams import HParamsHook

    hparams = HParamsHook(str(rec.logs_dir), flags, trial_id=rec.name)   # as run_job adds it
    hparams.after_eval(20, {"accuracy": 0.75, "auc": float("nan")})
    hparams.close()
    assert hparams.written
    rec.complete(plots=False)
    return rec


def test_logdir_arguments(tmp_path):
    run = tmp_path / "runs" / "2026-11-29T10-00-01Z"
    (run / "tfruns.d").mkdir(parents=True)
    (run / "logs").mkdir()
    other = tmp_path / "events"
    other.mkdir()
    assert logdir_arguments(run) == ["--logdir", str((run / "logs").resolve())]
    assert logdir_arguments(tmp_path / "runs") == ["--logdir", str((tmp_path / "runs").resolve())]
    assert logdir_arguments([run, other]) == [
        "--logdir_spec", f"2026-11-29T10-00-01Z:{(run / 'logs').resolve()},events:{other.resolve()}"]
    assert logdir_arguments({"a": other}) == ["--logdir_spec", f"a:{other.resolve()}"]
    with pytest.raises(TensorBoardError, match="does not exist"):
        logdir_arguments(tmp_path / "missing")
    with pytest.raises(TensorBoardError, match="may not"):
        logdir_arguments({"a:b": other})
    assert resolve_targets([], str(tmp_path / "runs")) == str(tmp_path / "runs")
    assert resolve_targets(["latest"], str(tmp_path / "runs")) == str(run)
    assert resolve_targets(["latest", str(other)], str(tmp_path / "runs")) == {
        "2026-11-29T10-00-01Z": str(run), "events": str(other)}


def test_tensorboard_serves_a_run_and_stops_cleanly(tmp_path):
    rec = make_run(tmp_path / "runs", 0.1)
    started = time.monotonic()
    with start_tensorboard(tmp_path / "runs", timeout=60) as server:
        assert server.url.startswith("http://127.0.0.1:") and server.running
        deadline = time.monotonic() + 15
        tags = {}
        while time.monotonic() < deadline:
            tags = json.loads(server.get("data/plugin/scalars/tags"))
            if f"{rec.name}/logs/train" in tags and f"{rec.name}/logs/eval" in tags:
                break
            time.sleep(0.25)
        assert "loss" in tags[f"{rec.name}/logs/train"], tags
        series = json.loads(server.get(f"data/plugin/scalars/scalars?run={rec.name}/logs/eval&tag=loss"))
        assert [point[1] for point in series] == [10, 20]
        experiment = json.loads(server.get("data/plugin/hparams/experiment",
                                           data=json.dumps({"experimentName": ""}).encode()))
        hparams = {h["name"] for h in experiment["hparamInfos"]}
        assert hparams == {"learning_rate", "optimizer.name"}  # None left out, nesting flattened
        assert {m["name"]["tag"] for m in experiment["metricInfos"]} >= {"accuracy", "loss"}
        final = json.loads(server.get(f"data/plugin/scalars/scalars?run={rec.name}/logs&tag=accuracy"))
        assert [(point[1], point[2]) for point in final] == [(20, 0.75)]
        pid = server.pid
    assert not server.running and server.process.returncode is not None
    assert _gone(pid)
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # nothing left in its process group
    assert time.monotonic() - started < 120  # bounded, even on a loaded machine


def test_tensorboard_failure_reports_its_stderr(tmp_path, forked_python, monkeypatch):
    # TensorBoard a fork of conftest's server ([sys.executable, ...] is how the product starts it):
    # its TensorFlow import measures nothing here, and nothing checks its process
    monkeypatch.setattr(sys, "executable", forked_python)
    (tmp_path / "logs").mkdir()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))  # bound, not listening: TensorBoard's bind fails at once
        port = busy.getsockname()[1]
        with pytest.raises(TensorBoardError) as err:
            start_tensorboard(tmp_path / "logs", port=port, timeout=120)
    message = str(err.value)
    assert "exited before answering" in message and f"--port {port}" in message
    assert re.search(r"could not bind|in use", message.split("Its stderr:")[1])  # TensorBoard's own words


def test_a_ctrl_c_while_tensorboard_starts_stops_it(tmp_path, forked_python, monkeypatch, ctrl_c_raises):
    """SIGINT the moment TensorBoard is forked (inside `subprocess.Popen`): the KeyboardInterrupt
    waits until the server is held, then stops it; raised where it arrived, it left TensorBoard
    serving with nothing to stop it. forked_python: conftest's fork server, which the stop ends."""
    monkeypatch.setattr(sys, "executable", forked_python)
    (tmp_path / "logs").mkdir()
    started: list[subprocess.Popen] = []

    class PopenInterrupted(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self)
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(subprocess, "Popen", PopenInterrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            start_tensorboard(tmp_path / "logs", timeout=60)
        assert len(started) == 1 and started[0].poll() is not None  # stopped and reaped
    finally:
        for process in started:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def test_tensorboard_command_stops_on_ctrl_c(tmp_path, python_env):
    rec = RunRecorder.create(tmp_path / "runs", config={}, flags={}, script="a.yaml", planned_rows=None)
    child = subprocess.Popen([sys.executable, "-m", "tpuestimator.commands.tensorboard", "latest",
                              "--runs-dir", str(tmp_path / "runs")], env=python_env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
        assert line.startswith("TensorBoard http://127.0.0.1:"), child.stderr.read() if not line else line
        tb_pid = int(line.split("(pid ")[1].split(")")[0])
        child.send_signal(signal.SIGINT)
        assert child.wait(20) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert "Stopping TensorBoard" in child.stdout.read()
    assert _gone(tb_pid)
    assert rec.run_dir.is_dir()
