"""SIGTERM / SIGINT sent to the real `tpuestimator train` process (issue 24.1): what a scheduler
or a preempted VM does. The CLI must finish the device loop, save a checkpoint there, mark the
run interrupted and exit 143 / 130 (test_interrupts.py signals `run_job` in-process; this
checks the command's own handlers and exit codes, which nothing else did).

The signal is sent only once the child has written its first checkpoint (its readiness sign:
the job, and so its handlers, are running), never while the interpreter starts."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tpuestimator.jobs.modeldir import checkpoint_step
from tpuestimator.runs import check_run_dir, ls_runs

pytestmark = pytest.mark.slow   # a CLI process each (TensorFlow start-up)

TIMEOUT_S = 300
# Long enough never to finish before the signal (sent right after the checkpoint of step 20),
# short enough that a child orphaned by a killed test run ends by itself; small loops, so the
# stop comes within ms.
SETTINGS = ["train.max_steps=20000", "train.iterations_per_loop=5", "train.save_checkpoints_steps=20",
            "eval.every_n_steps=1000000"]


def train_command(python: str, fixtures_dir: Path, model_dir: Path, runs: Path, settings: list[str]) -> list[str]:
    command = [python, "-m", "tpuestimator", "train", str(fixtures_dir / "parity" / "parity.yaml"),
               "--model-dir", str(model_dir), "--runs-dir", str(runs)]
    for setting in settings:
        command += ["--set", setting]
    return command


def signal_when_ready(command: list[str], env: dict, model_dir: Path, sig: int, log: Path) -> int:
    """Starts `command`, waits for its first checkpoint, sends `sig`; returns the exit code."""
    with open(log, "w") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            start = time.monotonic()
            while checkpoint_step(model_dir) is None:
                assert proc.poll() is None, f"the job ended before its first checkpoint:\n{log.read_text()[-3000:]}"
                assert time.monotonic() - start < TIMEOUT_S, "no checkpoint within the time limit"
                time.sleep(0.02)
            proc.send_signal(sig)
            return proc.wait(TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_the_cli_saves_a_checkpoint_records_the_stop_and_exits_with_its_code(
        tmp_path, fixtures_dir, python_env, forked_python, capsys, sig, code):
    model_dir, runs = tmp_path / "m", tmp_path / "runs"
    log = tmp_path / "train.log"
    # python_env: as on the core install (scikit-learn hidden, 2 CPU s less); forked_python: a
    # real process that gets the signal and exits as `python` would, without its TensorFlow
    # import (~6 CPU s; the CLI's handlers are installed after it, by the job)
    returncode = signal_when_ready(train_command(forked_python, fixtures_dir, model_dir, runs, SETTINGS), python_env,
                                   model_dir, sig, log)
    out = log.read_text()
    assert returncode == code, f"exit {returncode}, expected {code}:\n{out[-3000:]}"
    assert "Traceback" not in out, out[-3000:]
    stopped = checkpoint_step(model_dir)
    name = signal.Signals(sig).name
    # the step where the CLI says it stopped is the step of the checkpoint on disk
    assert f"error: Training stopped by {name} at global step {stopped}: checkpoint" in out, out[-3000:]
    assert stopped % 5 == 0 and stopped >= 20   # a loop boundary, at or after the first checkpoint
    [row] = ls_runs(runs)
    assert row["status"] == "interrupted" and row["completed"] is False and row["global_step"] == stopped
    assert f"{name} at global step {stopped}:" in row["interrupted"], row["interrupted"]
    assert check_run_dir(row["run_dir"]) == []
    if sig != signal.SIGTERM:
        return
    # the same command, asked for 10 more steps, resumes from that checkpoint (in this process:
    # the resume is not about the process, and a second TensorFlow start costs seconds)
    from tpuestimator.cli import main

    again = train_command(sys.executable, fixtures_dir, model_dir, runs, [*SETTINGS[1:], f"train.max_steps={stopped + 10}"])
    assert again[1:3] == ["-m", "tpuestimator"]
    returncode = main(again[3:])
    captured = capsys.readouterr()
    assert returncode == 0, captured.out[-2000:] + captured.err[-3000:]
    assert f"trained to global step {stopped + 10}" in captured.out
    latest = ls_runs(runs)[0]
    assert latest["status"] == "completed" and latest["resumed_from_step"] == stopped
