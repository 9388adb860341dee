"""Issue 13.3: SIGTERM/SIGINT during a training job (python/tpuestimator/interrupts.py).

SIGTERM used to end the process in 0.05 s with no checkpoint (~40 steps lost). Now the loop
finishes, a checkpoint is saved at that step, the run is recorded as interrupted, and a
rerun resumes. The signals are real (os.kill on this process, from a hook at a chosen step)."""
from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from tpuestimator.jobs.interrupts import EXIT_CODES, StopOnSignal, TrainingInterrupted
from tpuestimator.jobs.modeldir import checkpoint_step
from tpuestimator.runs import check_run_dir, ls_runs

pytestmark = pytest.mark.real_process  # TPUESTIMATOR_STRESS=N repeats these (conftest.py)

OVERRIDES = ["train.max_steps=60", "train.iterations_per_loop=5", "train.save_checkpoints_steps=40",
             "eval.every_n_steps=30"]


def send_at(step_wanted: int, *signals: int):
    """A hook that sends `signals` to this process after the loop ending at `step_wanted`."""
    def hook(event, info):
        if event == "after_loop" and info["step"] == step_wanted:
            for sig in signals:
                os.kill(os.getpid(), sig)
    return hook


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_saves_a_checkpoint_marks_the_run_interrupted_and_a_rerun_resumes(tmp_path, fixtures_dir, sig):
    from tpuestimator.jobs.job import run_job

    config = str(fixtures_dir / "parity" / "parity.yaml")
    model_dir, runs = str(tmp_path / "m"), tmp_path / "runs"
    before = signal.getsignal(sig)
    evaluated = []
    with pytest.raises(TrainingInterrupted) as err:
        run_job(config, overrides=OVERRIDES, model_dir=model_dir, runs_dir=str(runs),
                hooks=[send_at(15, sig), lambda event, info: evaluated.append(info["step"]) if event == "after_eval" else None],
                handle_signals=True)
    assert signal.getsignal(sig) is before  # the caller's handler is back
    assert evaluated == []  # stopped at once: no evaluation of the interrupted step first
    exc = err.value
    # the loop that was running when the signal came (ending at 15) finished; the next
    # boundary is where it stopped, with a checkpoint there (periodic ones are every 40)
    assert exc.step == 15 and checkpoint_step(model_dir) == 15 and exc.checkpoint.endswith("ckpt-15")
    assert exc.exit_code == EXIT_CODES[sig] == {signal.SIGTERM: 143, signal.SIGINT: 130}[sig]
    assert exc.signal_name == signal.Signals(sig).name and "resume" in str(exc)
    row = ls_runs(runs)[0]
    assert row["status"] == "interrupted" and row["completed"] is False and row["global_step"] == 15
    assert signal.Signals(sig).name in row["interrupted"] and "error_message" not in row
    assert check_run_dir(row["run_dir"]) == []
    completed = Path(row["run_dir"]) / "tfruns.d" / "properties" / "completed"
    completed.write_text("TRUE\n")  # the validator flags an interrupted run that says completed
    assert any("interrupted" in p for p in check_run_dir(row["run_dir"]))
    completed.write_text("FALSE\n")

    result = run_job(config, overrides=OVERRIDES, model_dir=model_dir, runs_dir=str(runs))
    assert result.global_step == 60
    rows = ls_runs(runs)
    assert rows[0]["status"] == "completed" and rows[0]["resumed_from_step"] == 15


def test_a_signal_during_an_evaluation_stops_after_it(tmp_path, fixtures_dir):
    from tpuestimator.jobs.job import run_job

    def during_eval(event, info):
        if event == "after_eval" and info["step"] == 30:
            os.kill(os.getpid(), signal.SIGTERM)

    hooks_before_stopper = [during_eval]  # the job's stop hook runs after the caller's hooks
    with pytest.raises(TrainingInterrupted) as err:
        run_job(str(fixtures_dir / "parity" / "parity.yaml"), overrides=OVERRIDES, model_dir=str(tmp_path / "m"),
                runs_dir=str(tmp_path / "runs"), hooks=hooks_before_stopper, handle_signals=True)
    assert err.value.step == 30 and checkpoint_step(tmp_path / "m") == 30


def test_a_second_sigint_aborts_without_waiting_for_a_checkpoint(tmp_path, fixtures_dir):
    from tpuestimator.jobs.job import run_job

    with pytest.raises(TrainingInterrupted) as err:
        run_job(str(fixtures_dir / "parity" / "parity.yaml"), overrides=OVERRIDES, model_dir=str(tmp_path / "m"),
                runs_dir=str(tmp_path / "runs"), hooks=[send_at(15, signal.SIGTERM, signal.SIGINT)],
                handle_signals=True)
    exc = err.value
    assert exc.aborted and exc.step is None and exc.exit_code == 143 and "aborted" in str(exc)
    assert isinstance(exc.__cause__, KeyboardInterrupt)
    assert checkpoint_step(tmp_path / "m") is None  # nothing saved: the periodic checkpoint is at 40
    row = ls_runs(tmp_path / "runs")[0]
    assert row["status"] == "interrupted" and "aborted" in row["interrupted"]
    assert check_run_dir(row["run_dir"]) == []


def test_without_handlers_a_keyboard_interrupt_is_recorded_as_interrupted(tmp_path, fixtures_dir):
    """R's Ctrl-C reaches Python as KeyboardInterrupt (no handlers installed for R)."""
    from tpuestimator.jobs.job import run_job

    def interrupt(event, info):
        if event == "after_loop" and info["step"] == 10:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_job(str(fixtures_dir / "parity" / "parity.yaml"), overrides=OVERRIDES, model_dir=str(tmp_path / "m"),
                runs_dir=str(tmp_path / "runs"), hooks=[interrupt])
    row = ls_runs(tmp_path / "runs")[0]
    assert row["status"] == "interrupted" and "KeyboardInterrupt" in row["interrupted"]
    assert not (tmp_path / "m" / "tpuestimator.lock").exists()


def test_handlers_are_installed_only_from_the_main_thread():
    stopper, out = StopOnSignal(), {}
    thread = threading.Thread(target=lambda: out.setdefault("installed", stopper.install()))
    thread.start()
    thread.join()
    assert out["installed"] is False
    before = signal.getsignal(signal.SIGTERM)
    assert stopper.install() is True and signal.getsignal(signal.SIGTERM) is not before
    stopper.restore()
    assert signal.getsignal(signal.SIGTERM) is before
