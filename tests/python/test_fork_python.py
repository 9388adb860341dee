"""The fork server's `python` (fork_python.py, conftest.py's `forked_python`) behaves as a fresh
`python` where the CLI-subprocess tests depend on it: exit status, stdio, folder, environment,
signals to the launcher (by its id and to its process group), the launcher's death, a death by
signal, and `sys.executable` for the run's own children. Each run here is a fork: no TensorFlow
start, a fraction of a CPU second."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

import fork_python

pytestmark = pytest.mark.real_process  # TPUESTIMATOR_STRESS=N repeats these (conftest.py)

TIMEOUT_S = 60


def _wait_for(path, timeout=TIMEOUT_S) -> str:
    start = time.monotonic()
    while not (path.exists() and path.read_text().endswith("\n")):
        assert time.monotonic() - start < timeout, f"{path} not written within {timeout} s"
        time.sleep(0.02)
    return path.read_text()


def _gone(pid: int, timeout: float) -> bool:
    start = time.monotonic()
    while fork_python._alive(pid):   # a zombie (not yet waited for by its supervisor) is gone too
        if time.monotonic() - start > timeout:
            return False
        time.sleep(0.02)
    return True


def test_a_run_gets_the_launchers_arguments_stdio_folder_environment_and_exit_status(forked_python, python_env,
                                                                                     tmp_path):
    code = ("import os, sys; data = sys.stdin.read(); print(data.upper(), os.getcwd(), os.environ['MARK'], "
            "sys.argv[1:], sys.executable); print('to stderr', file=sys.stderr); sys.exit(7)")
    proc = subprocess.run([forked_python, "-c", code, "a", "b"], input="hello", cwd=tmp_path,
                          env=dict(python_env, MARK="mine"), capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 7, proc.stderr
    assert proc.stdout == f"HELLO {tmp_path} mine ['a', 'b'] {forked_python}\n"
    assert proc.stderr == "to stderr\n"
    module = subprocess.run([forked_python, "-m", "json.tool"], input='{"a": 1}', env=python_env,
                            capture_output=True, text=True, timeout=TIMEOUT_S)
    assert (module.returncode, module.stdout) == (0, '{\n    "a": 1\n}\n'), module.stderr


def test_a_run_that_dies_by_a_signal_kills_its_launcher_with_it(forked_python, python_env):
    killed = subprocess.run([forked_python, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"],
                            env=python_env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    # an uncaught KeyboardInterrupt: the traceback, then death by SIGINT, as CPython ends
    interrupted = subprocess.run([forked_python, "-c", "raise KeyboardInterrupt"], env=python_env,
                                 capture_output=True, text=True, timeout=TIMEOUT_S)
    assert interrupted.returncode == -signal.SIGINT and "KeyboardInterrupt" in interrupted.stderr


HANDLER = """
import os, signal, sys, time
def stop(sig, frame):
    print("got", signal.Signals(sig).name, flush=True)
    sys.exit(128 + sig)
signal.signal(signal.SIGTERM, stop)
try:
    # closed by the statement, not by the file object's finalizer: the test signals once the pid is
    # flushed, and a handler's exception raised in a finalizer (the close) is printed and dropped
    with open(sys.argv[1], "w") as pid_file:
        pid_file.write(f"{os.getpid()}\\n")
    for _ in range(1200):   # short sleeps: a signal that lands just before a sleep's system call
        time.sleep(0.1)     # is handled once that sleep ends
except KeyboardInterrupt:
    print("got SIGINT", flush=True)
    sys.exit(130)
"""


@pytest.mark.parametrize("sig, group", [(signal.SIGTERM, False), (signal.SIGINT, False), (signal.SIGTERM, True)],
                         ids=["SIGTERM", "SIGINT", "SIGTERM-to-group"])
def test_a_signal_to_the_launcher_reaches_the_run(forked_python, python_env, tmp_path, sig, group):
    """By its id (what Popen.send_signal does) or to its process group (how the local cluster
    stops a task it started with start_new_session)."""
    ready = tmp_path / "pid"
    # SIGINT as from a terminal: pytest started in the background of a script (`cmd &`, nohup)
    # has it ignored, which the launcher and so its run would inherit and keep, as `python` does
    proc = subprocess.Popen([forked_python, "-c", HANDLER, str(ready)], env=python_env, stdout=subprocess.PIPE,
                            text=True, start_new_session=group,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        run_pid = int(_wait_for(ready))
        assert run_pid != proc.pid   # the run is a fork of the server, not the launcher itself
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert out == f"got {signal.Signals(sig).name}\n" and proc.returncode == 128 + sig


def test_the_launchers_death_kills_the_run(forked_python, python_env, tmp_path):
    ready = tmp_path / "pid"
    proc = subprocess.Popen([forked_python, "-c", HANDLER, str(ready)], env=python_env)
    run_pid = int(_wait_for(ready))
    proc.kill()
    proc.wait(TIMEOUT_S)
    fork_python.settle(forked_python)   # what a test reads after the kill changes no more
    assert _gone(run_pid, timeout=0.5), f"the run {run_pid} outlived its launcher and `settle`"


def test_the_runs_own_python_is_a_fork_too_and_a_differing_import_setting_is_refused(forked_python, python_env):
    code = ("import subprocess, sys; print(subprocess.run([sys.executable, '-c', 'import sys; print(sys.executable)'], "
            "capture_output=True, text=True).stdout, end='')")
    proc = subprocess.run([forked_python, "-c", code], env=python_env, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    assert (proc.returncode, proc.stdout) == (0, forked_python + "\n"), proc.stderr
    refused = subprocess.run([forked_python, "-c", "pass"], env=dict(python_env, TF_ENABLE_ONEDNN_OPTS="0"),
                             capture_output=True, text=True, timeout=TIMEOUT_S)
    assert refused.returncode == 2 and "TF_ENABLE_ONEDNN_OPTS='0' differs from the server's" in refused.stderr
    assert sys.executable != forked_python


def test_a_signal_the_launcher_was_started_with_ignored_stays_ignored_in_the_run(forked_python, python_env, tmp_path):
    """As `python` started in the background of a script (SIGINT ignored) keeps it ignored; a
    handler the run sets still gets the SIGINT sent to the launcher."""
    code = "import signal; print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)"
    for disposition, expected in ((signal.SIG_IGN, "True\n"), (signal.SIG_DFL, "False\n")):
        proc = subprocess.run([forked_python, "-c", code], env=python_env, capture_output=True, text=True,
                              timeout=TIMEOUT_S, preexec_fn=lambda d=disposition: signal.signal(signal.SIGINT, d))
        assert (proc.returncode, proc.stdout) == (0, expected), proc.stderr
    handler = HANDLER.replace("signal.SIGTERM, stop", "signal.SIGINT, stop")
    ready = tmp_path / "pid"
    proc = subprocess.Popen([forked_python, "-c", handler, str(ready)], env=python_env, stdout=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        _wait_for(ready)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (out, proc.returncode) == ("got SIGINT\n", 128 + signal.SIGINT)


def test_idle_tensorflow_threads_sleep_in_the_test_process_and_in_a_run(forked_python, python_env):
    """tensorflow_threads.py: the setting reaches the runtime of this pytest process (conftest.py)
    and of a forked run (the server set it before forking), where a fresh `python` keeps
    TensorFlow's default; ops compute as before."""
    import tensorflow as tf
    from tensorflow.python.eager import context

    assert tf.reduce_sum(tf.range(10)).numpy() == 45        # the runtime has started
    assert context.context().config.experimental.disable_thread_spinning is True
    code = ("import tensorflow as tf; from tensorflow.python.eager import context; "
            "print(int(tf.reduce_sum(tf.range(10))), context.context().config.experimental.disable_thread_spinning)")
    forked, fresh = (subprocess.run([python, "-c", code], env=python_env, capture_output=True, text=True,
                                    timeout=TIMEOUT_S) for python in (forked_python, sys.executable))
    assert (forked.returncode, forked.stdout) == (0, "45 True\n"), forked.stderr[-2000:]
    assert (fresh.returncode, fresh.stdout) == (0, "45 False\n"), fresh.stderr[-2000:]
