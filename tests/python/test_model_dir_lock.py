"""Issue 13.1: the model-dir lock (python/tpuestimator/model_dir_lock.py).

Two `train` commands on one model dir used to end in a 40-line ``OSError: Directory not
empty`` traceback; now the second one fails at once with a message naming the model dir, the
owner and the ways out, a killed owner's lock is taken over, and runs into one runs folder
with different model dirs stay independent."""
from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tpuestimator.jobs.model_dir_lock import LOCK_FILE, ModelDirLock, ModelDirLockedError, lock_needed
from tpuestimator.runs import check_run_dir, ls_runs

pytestmark = pytest.mark.real_process  # TPUESTIMATOR_STRESS=N repeats these (conftest.py)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.quick("jobs")
def test_a_second_lock_fails_with_owner_and_fixes_and_the_file_goes_on_release(tmp_path):
    model_dir = tmp_path / "m"
    with ModelDirLock(model_dir, command="tpuestimator train a.yaml") as lock:
        owner = json.loads((model_dir / LOCK_FILE).read_text())
        assert owner["pid"] == os.getpid() and owner["host"] == socket.gethostname()
        assert owner["command"] == "tpuestimator train a.yaml" and owner["started"] <= time.time()
        with pytest.raises(ModelDirLockedError) as err:
            ModelDirLock(model_dir).acquire()
        message = str(err.value)
        assert str(model_dir) in message and f"pid {os.getpid()}" in message and socket.gethostname() in message
        assert "tpuestimator train a.yaml" in message and "--model-dir" in message and LOCK_FILE in message
        assert err.value.owner["pid"] == os.getpid() and err.value.model_dir == str(model_dir)
        # evaluate/export (shared) may not read a model dir while it is trained
        with pytest.raises(ModelDirLockedError, match="evaluate or export"):
            ModelDirLock(model_dir, shared=True).acquire()
        assert lock.held
    assert not (model_dir / LOCK_FILE).exists()
    # released also when the body raises
    with pytest.raises(RuntimeError), ModelDirLock(model_dir):
        raise RuntimeError("boom")
    assert not (model_dir / LOCK_FILE).exists()
    ModelDirLock(model_dir).acquire().release()


def test_readers_share_and_keep_a_training_out(tmp_path):
    model_dir = tmp_path / "m"
    first, second = ModelDirLock(model_dir, shared=True).acquire(), ModelDirLock(model_dir, shared=True).acquire()
    with pytest.raises(ModelDirLockedError, match="in use by a job whose details are not written"):
        ModelDirLock(model_dir).acquire()
    first.release()
    assert (model_dir / LOCK_FILE).exists()  # the other reader still holds it
    second.release()
    assert not (model_dir / LOCK_FILE).exists()  # the last reader removes it


def test_an_evaluate_or_export_refused_by_a_training_names_its_pid(tmp_path, fixtures_dir):
    """Issue 19.9: the refusal said "two jobs must not evaluate or export at once" (evaluations
    do share); it names the training, its pid first, and the error carries `pid`."""
    from tpuestimator.jobs.model_dir_jobs import evaluate_job, export_model

    model_dir = tmp_path / "m"
    model_dir.mkdir()
    (model_dir / "config.yaml").write_text((fixtures_dir / "parity" / "parity.yaml").read_text())
    with ModelDirLock(model_dir, command="tpuestimator train big.yaml"):
        for job in (evaluate_job, export_model):
            with pytest.raises(ModelDirLockedError) as caught:
                job(str(model_dir))
            message = str(caught.value)
            assert f"is being trained by pid {os.getpid()} on host {socket.gethostname()}" in message, message
            assert "tpuestimator train big.yaml" in message and "wait for that training to end" in message
            assert caught.value.pid == os.getpid() and caught.value.owner["mode"] == "train"


def test_a_stale_lock_of_a_dead_process_is_taken_over_with_a_warning(tmp_path, caplog):
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    dead = _dead_pid()
    (model_dir / LOCK_FILE).write_text(json.dumps({"pid": dead, "host": socket.gethostname(), "started": time.time(),
                                                   "command": "tpuestimator train old.yaml", "mode": "train"}))
    with caplog.at_level(logging.WARNING, logger="tpuestimator.jobs.model_dir_lock"), ModelDirLock(model_dir):
        assert json.loads((model_dir / LOCK_FILE).read_text())["pid"] == os.getpid()
    assert f"stale lock of pid {dead}" in caplog.text and "old.yaml" in caplog.text


def test_a_lock_from_another_host_is_refused_with_how_to_remove_it(tmp_path):
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    path = model_dir / LOCK_FILE
    path.write_text(json.dumps({"pid": 4242, "host": "other-vm", "started": time.time(), "command": "x"}))
    with pytest.raises(ModelDirLockedError) as err:
        ModelDirLock(model_dir).acquire()
    assert "other-vm" in str(err.value) and f"remove {path}" in str(err.value)
    assert path.exists()  # left for the user to judge


def test_a_live_owner_is_respected_even_where_flock_is_not(tmp_path):
    """A file system without working flock: the recorded owner's pid still protects it."""
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.2)
        (model_dir / LOCK_FILE).write_text(json.dumps({"pid": sleeper.pid, "host": socket.gethostname(),
                                                       "started": time.time(), "command": "sleeper"}))
        with pytest.raises(ModelDirLockedError, match=f"pid {sleeper.pid}"):
            ModelDirLock(model_dir).acquire()
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.parametrize("tf_config,needed", [
    (None, True),
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}}', True),
    ('{"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0}}', True),
    ('{"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 1}}', False),
    ('{"cluster": {"chief": ["c:1"], "worker": ["a:1"]}, "task": {"type": "chief", "index": 0}}', True),
    ('{"cluster": {"chief": ["c:1"], "worker": ["a:1"]}, "task": {"type": "worker", "index": 0}}', False),
    ('{"cluster": {"chief": ["c:1"], "worker": ["a:1"], "evaluator": ["e:1"]}, "task": {"type": "evaluator"}}',
     False),
])
def test_only_the_chief_of_a_cluster_takes_the_lock(tf_config, needed):
    assert lock_needed(tf_config or "") is needed


def test_a_training_job_refuses_a_locked_model_dir_and_releases_its_own(tmp_path, fixtures_dir):
    from tpuestimator.jobs.job import run_job
    from tpuestimator.jobs.model_dir_jobs import evaluate_job

    config = str(fixtures_dir / "parity" / "parity.yaml")
    model_dir = tmp_path / "m"
    with ModelDirLock(model_dir, command="another train"), pytest.raises(ModelDirLockedError, match="another train"):
        run_job(config, model_dir=str(model_dir), runs_dir=str(tmp_path / "runs"))
    assert not (tmp_path / "runs").exists()  # refused before anything was recorded
    result = run_job(config, overrides=["train.max_steps=20"], model_dir=str(model_dir), record=False)
    assert result.global_step == 20 and not (model_dir / LOCK_FILE).exists()
    with ModelDirLock(model_dir), pytest.raises(ModelDirLockedError, match="evaluate or export"):
        evaluate_job(str(model_dir))
    assert evaluate_job(str(model_dir))["global_step"] == 20 and not (model_dir / LOCK_FILE).exists()


@pytest.mark.slow
def test_two_cli_trains_on_one_model_dir_and_two_into_one_runs_folder(tmp_path, fixtures_dir, python_env,
                                                                       forked_python):
    """Two trains on one model dir: the second fails at once with the message, no traceback.
    Two trains with different model dirs into one runs folder: both complete, two valid runs."""
    config = str(fixtures_dir / "parity" / "parity.yaml")
    runs = tmp_path / "runs"
    args = ["-m", "tpuestimator", "train", config, "--runs-dir", str(runs),
            "--set", "train.max_steps=400", "--set", "train.iterations_per_loop=2"]
    cmd = [forked_python, *args]   # conftest.py: without the process's TensorFlow import (~6 CPU s)

    def start(python, model_dir):
        return subprocess.Popen([python, *args, "--model-dir", str(tmp_path / model_dir)], env=python_env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    # the lock holder a fresh `python`: the message names its id, which a fork's launcher does not have
    first, other = start(sys.executable, "a"), start(forked_python, "b")
    try:
        lock = tmp_path / "a" / LOCK_FILE
        deadline = time.monotonic() + 120
        while not lock.exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        second = subprocess.run([*cmd, "--model-dir", str(tmp_path / "a"), "--no-record"], env=python_env,
                                capture_output=True, text=True, timeout=120)
        first_out, other_out = first.communicate(timeout=300), other.communicate(timeout=300)
    finally:
        for proc in (first, other):
            if proc.poll() is None:
                proc.kill()
    assert first.returncode == 0 and other.returncode == 0, first_out[1][-2000:] + other_out[1][-2000:]
    assert second.returncode == 1, second.stderr[-2000:]
    assert "Traceback" not in second.stderr and str(tmp_path / "a") in second.stderr
    assert f"pid {first.pid}" in second.stderr and "--model-dir" in second.stderr
    rows = ls_runs(runs)
    assert len(rows) == 2 and {r["status"] for r in rows} == {"completed"}
    assert {Path(r["model_dir"]).name for r in rows} == {"a", "b"}
    assert all(check_run_dir(r["run_dir"]) == [] for r in rows)
    assert all(r["global_step"] == 400 for r in rows)
