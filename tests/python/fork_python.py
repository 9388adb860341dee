"""A `python` whose start-up skips TensorFlow's import: a server process imports TensorFlow and
Keras once, and every run of the launcher is a fork of it, running the command line as
`python` would. Each fresh Python that imports TensorFlow pays ~5-7 CPU seconds for it; a
fork costs a fraction of a second. Used where the process is real but its TensorFlow import
is not what is tested: the benchmark smoke runs (test_benchmarks_smoke.py: their scripts'
child Pythons), the CLI-subprocess tests (conftest.py's `forked_python`: signals, kills,
clusters, CLI errors, the docs pages' bash lines, the rpy2 cases' embedded R, the local
writer's imports) and the full-disk tests (test_disk_full.py: a server in the user and mount
namespace their tmpfs is mounted in). A test about start-up itself (the import, `--version`,
the wheel install) keeps `sys.executable`.

    python fork_python.py serve SOCKET          # imports TensorFlow, prints "ready", serves until SIGTERM
    python -S -E fork_python.py run SOCKET ARGS  # = `python ARGS` (the launcher `launcher()` writes)

ARGS: `-c CODE ...`, `-m MODULE ...`, `SCRIPT ...` or `- ...` (the code on stdin), after any of
`-u`, `-B`; anything else is refused (exit 2, naming it). The run gets the launcher's stdin,
stdout, stderr (passed over the socket), working folder and environment (PYTHONPATH's folders
go first on sys.path, as `python` puts them). A run is a real process that behaves, seen from
the launcher's side, as the launcher were that `python`:
- its exit status is the launcher's, and a run killed by a signal kills the launcher with the
  same signal (`subprocess` sees -N, a shell 128+N), a KeyboardInterrupt that ends it included
  (as CPython exits by SIGINT then);
- a signal sent to the launcher (by its id or to its process group: `start_new_session` tasks)
  is passed on to the run (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2; one the launcher
  was started with ignored stays ignored in the run, as `python` keeps it); when the
  launcher dies (SIGKILL, a timeout) the run is killed (SIGKILL) as soon as its supervisor sees
  the launcher's end of the socket close (a select wake-up: milliseconds);
- `sys.executable` is the launcher, as a `python`'s is the program that ran it: a run that
  starts a Python the usual way (`[sys.executable, ...]`: the local cluster's tasks, TensorBoard)
  starts a fork too, chosen by the interpreter the test ran, not by the product;
- the variables that change what TensorFlow's import does (IMPORT_ENV) must match the
  server's: a run that sets them differently is refused (exit 2, naming the variable), since
  its import already happened in the server.
The fork happens before TensorFlow's runtime starts (the server only imports it), so each run
configures its own devices, as a fresh process does. What differs from a fresh `python`: the
run's id is not the launcher's (a test that needs the run's id reads it from the run itself),
and its parent is its supervisor; the objects of the server's imports are frozen
(`gc.freeze`: a run's `gc.get_freeze_count()` is not 0, as a fresh `python`'s is); and
TensorFlow's idle threads sleep instead of spinning (tensorflow_threads.py), which changes
when a thread waits, not what it computes.

Only the server's first import is saved: what a run computes is its own. The server waits
for every run it forked before it exits, so their CPU time counts in its parent's (pytest's)
children's time; its log (`fork-python.log` beside the socket) has each run's CPU seconds and
the test that ran it (PYTEST_CURRENT_TEST).
"""
from __future__ import annotations

import array
import json
import os
import select
import signal
import socket
import struct
import sys
import time
from pathlib import Path

MAX_FDS = 3
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
# read by TensorFlow's or Keras's import (done once, in the server): a run must not expect another value
IMPORT_ENV = ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS", "CUDA_VISIBLE_DEVICES", "KERAS_BACKEND",
              "TF_USE_LEGACY_KERAS", "KERAS_HOME", "TF_XLA_FLAGS")


def launcher(folder: Path, socket_path: Path) -> Path:
    """An executable `python` in `folder` that runs its arguments in a fork of the server at `socket_path`."""
    path = folder / "python"
    path.write_text(f"#!/bin/sh\nexec {sys.executable} -S -E {Path(__file__).resolve()} run {socket_path} \"$@\"\n")
    path.chmod(0o755)
    return path


# ---------------------------------------------------------------------------- the launcher
def run(socket_path: str, args: list[str]) -> int:
    executable = str(Path(socket_path).with_name("python"))   # the launcher (launcher() writes it there)
    # a signal this launcher was started with ignored (SIGINT in a background job) stays ignored
    # in the run, as `python` keeps it
    ignored = [int(sig) for sig in FORWARDED if signal.getsignal(sig) == signal.SIG_IGN]
    payload = json.dumps({"args": args, "cwd": os.getcwd(), "env": dict(os.environ),
                          "executable": executable, "ignored": ignored}).encode()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(socket_path)
    conn.sendall(struct.pack("!I", len(payload)))
    conn.sendmsg([payload], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])

    def forward(sig, _frame):
        try:
            conn.sendall(bytes([sig]))
        except OSError:
            pass
    for sig in FORWARDED:   # all: whether the run ignores one is the run's disposition (it may set a handler)
        signal.signal(sig, forward)
    data = b""
    while len(data) < 4:
        chunk = conn.recv(4 - len(data))   # a forwarded signal interrupts it; recv resumes (PEP 475)
        if not chunk:
            print("fork_python: the server ended the run without its exit status", file=sys.stderr)
            return 1
        data += chunk
    code = struct.unpack("!i", data)[0]
    if code < 0:   # the run died by signal -code: so does its launcher, as that `python` would have
        if -code not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(-code, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [-code])
        os.kill(os.getpid(), -code)
        return 128 - code
    return code


# ---------------------------------------------------------------------------- the server
def serve(socket_path: str) -> int:
    import keras  # noqa: F401  (what every run would import: the point of the server)
    import tensorflow  # noqa: F401

    global SERVER_IMPORT_ENV
    SERVER_IMPORT_ENV = {name: os.environ.get(name) for name in IMPORT_ENV}
    # each run's runtime starts with idle threads that sleep, as the test processes' do
    import tensorflow_threads

    tensorflow_threads.stop_thread_spinning()
    # Frozen before any fork (the gc module's advice for fork servers): a run's full collections
    # skip the imported heap, and do not write to its pages (each write a copy-on-write fault).
    import gc

    gc.collect()
    gc.freeze()

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(16)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    print("ready", flush=True)
    supervisors: dict[int, int] = {}   # supervisor's id: its launcher's id
    parent = os.getppid()
    while not stopping:
        ready, _, _ = select.select([listener], [], [], 0.2)
        _reap(supervisors, block=False)
        if os.getppid() != parent:   # pytest is gone (killed): no one will stop this server
            break
        if not ready:
            continue
        conn, _ = listener.accept()
        launcher_pid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                           struct.calcsize("3i")))[0]
        # A run whose launcher is dead is killed by its supervisor once that sees the socket close
        # (milliseconds later); no new run (a restart after a kill -9) nor `settle` is served
        # before: as with a fresh `python`, once the killed process is waited for, it is gone.
        for orphaned in [sup for sup, launcher in supervisors.items() if not _alive(launcher)]:
            os.waitpid(orphaned, 0)
            del supervisors[orphaned]
        pid = os.fork()
        if pid == 0:  # the supervisor of one run
            listener.close()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            code = 1
            try:
                code = _supervise(conn)
            finally:
                os._exit(code)
        conn.close()
        supervisors[pid] = launcher_pid
    listener.close()
    os.unlink(socket_path)
    _reap(supervisors, block=True)   # their CPU time reaches the server's parent only once waited for
    return 0


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, dead and not yet waited for, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def settle(launcher_path: str | Path) -> None:
    """Returns once every run of a dead launcher is dead too: after a test kills a launcher with
    SIGKILL and waits for it, what it reads next (the killed run's files) changes no more, as
    after a fresh `python`'s kill."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(Path(launcher_path).with_name("fork-python.sock")))
    payload = json.dumps({"settle": True}).encode()
    conn.sendall(struct.pack("!I", len(payload)) + payload)
    _exactly(conn, 4)
    conn.close()


SERVER_IMPORT_ENV: dict = {}


def _reap(pids: dict[int, int], *, block: bool) -> None:
    for pid in list(pids):
        done, _ = os.waitpid(pid, 0 if block else os.WNOHANG)
        if done:
            pids.pop(pid, None)


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    size = struct.unpack("!I", _exactly(conn, 4))[0]
    fds = array.array("i")
    data, ancillary, _, _ = conn.recvmsg(size, socket.CMSG_SPACE(MAX_FDS * fds.itemsize))
    for level, kind, raw in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(raw[:len(raw) - len(raw) % fds.itemsize])
    while len(data) < size:
        data += _exactly(conn, size - len(data))
    return json.loads(data), list(fds)


def _exactly(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError("the launcher closed the connection")
        data += chunk
    return data


def _supervise(conn: socket.socket) -> int:
    """Forks the run, then waits for it to end (its status goes back to the launcher) or for the
    launcher to go away (the run is killed)."""
    request, fds = _receive(conn)
    if request.get("settle"):   # served once the runs of dead launchers ended (serve)
        conn.sendall(struct.pack("!i", 0))
        return 0
    pid = os.fork()
    if pid == 0:
        conn.close()
        os._exit(_child(request, fds))
    for fd in fds:
        os.close(fd)
    started = time.perf_counter()
    test = request["env"].get("PYTEST_CURRENT_TEST", "")

    def log(what: str, usage) -> None:   # the server's log
        print(f"{usage.ru_utime + usage.ru_stime:7.1f} CPU s {time.perf_counter() - started:7.1f} s {what}  "
              f"{' '.join(request['args'])[:160]!r}  {test}", file=sys.stderr, flush=True)
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)   # -N: killed by signal N
            log(f"exit {code:3d}", usage)
            try:
                conn.sendall(struct.pack("!i", code))
            except OSError:
                pass
            return 0
        ready, _, _ = select.select([conn], [], [], 0.05)
        if not ready:
            continue
        try:
            forwarded = conn.recv(64)
        except OSError:
            forwarded = b""
        if not forwarded:   # the launcher is gone: so is its run
            os.kill(pid, signal.SIGKILL)
            _, _, usage = os.wait4(pid, 0)
            log("killed  ", usage)
            return 0
        for sig in forwarded:   # signals the launcher received, for the run
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass


def _child(request: dict, fds: list[int]) -> int:
    """The run itself: `python ARGS` with the launcher's stdio, folder and environment."""
    import atexit
    import io
    import runpy
    import traceback

    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    # a fresh `python`'s dispositions (the server's SIGTERM handler undone; CPython ignores SIGPIPE)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    for sig in request.get("ignored", ()):
        signal.signal(sig, signal.SIG_IGN)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.executable = request.get("executable") or sys.executable   # the module docstring says why
    if "tempfile" in sys.modules:   # as a fresh `python`: the temporary folder from this TMPDIR, when first asked
        sys.modules["tempfile"].tempdir = None
    args = list(request["args"])
    unbuffered = False
    while args and args[0] in ("-u", "-B"):
        unbuffered = unbuffered or args[0] == "-u"
        args.pop(0)
    write_through = unbuffered or bool(os.environ.get("PYTHONUNBUFFERED"))
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                                   line_buffering=True, write_through=write_through)
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                                   errors="backslashreplace", line_buffering=True,
                                                   write_through=True)
    pythonpath = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    base_path = [p for p in sys.path[1:] if p not in pythonpath]
    code = 0
    interrupted = False
    try:
        differing = [name for name in IMPORT_ENV if os.environ.get(name) != SERVER_IMPORT_ENV.get(name)]
        if differing:
            name = differing[0]
            raise _Usage(f"{name}={os.environ.get(name)!r} differs from the server's "
                         f"{SERVER_IMPORT_ENV.get(name)!r}, which its TensorFlow import used; start the "
                         f"server with it, or run a fresh python")
        if not args:
            raise _Usage("no arguments (an interactive Python is not served)")
        if args[0] == "-c":
            if len(args) < 2:
                raise _Usage("-c without its code")
            sys.argv = ["-c", *args[2:]]
            sys.path[:] = ["", *pythonpath, *base_path]
            exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        elif args[0] == "-m":
            if len(args) < 2:
                raise _Usage("-m without its module")
            sys.argv = [args[1], *args[2:]]
            sys.path[:] = [os.getcwd(), *pythonpath, *base_path]
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        elif args[0] == "-":
            sys.argv = args
            sys.path[:] = ["", *pythonpath, *base_path]
            exec(compile(sys.stdin.read(), "<stdin>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        elif args[0].startswith("-"):
            raise _Usage(f"the option {args[0]!r} is not served (only -c, -m, -, -u, -B)")
        else:
            sys.argv = args
            sys.path[:] = [str(Path(args[0]).resolve().parent), *pythonpath, *base_path]
            runpy.run_path(args[0], run_name="__main__")
    except _Usage as exc:
        print(f"fork_python: {exc}; run: {request['args']}", file=sys.stderr)
        code = 2
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        interrupted = True
    except BaseException:  # noqa: BLE001  (as `python` does: the traceback, exit status 1)
        traceback.print_exc()
        code = 1
    try:
        if "threading" in sys.modules:   # as `python` ends: its non-daemon threads first, then atexit
            sys.modules["threading"]._shutdown()
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    if interrupted:   # as CPython ends on an uncaught KeyboardInterrupt: killed by SIGINT
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return code


class _Usage(Exception):
    pass


def start(folder: Path, env: dict, *, wrapper: tuple[str, ...] = ()) -> tuple:
    """Starts a server (its files in `folder`) and returns (its process, the launcher's path); the
    caller ends it with `stop`. `wrapper`: a command that execs the server's command line after
    it (`unshare -rm`: the server, and so every run, in namespaces of its own; the process
    returned is then the server itself)."""
    import subprocess

    socket_path = folder / "fork-python.sock"
    log = open(folder / "fork-python.log", "w")  # noqa: SIM115  (closed by stop)
    proc = subprocess.Popen([*wrapper, sys.executable, str(Path(__file__).resolve()), "serve", str(socket_path)],
                            env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    # lines before "ready" are what the imports printed (from an embedded Python's environment,
    # R's: TensorFlow's note that ssl failed to load), kept for the error when it never comes
    printed = []
    line = proc.stdout.readline()
    while line and line.strip() != "ready":
        printed.append(line)
        line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        proc.wait()
        log.close()
        raise RuntimeError(f"the fork server did not start:\n{''.join(printed)[-3000:]}"
                           f"{(folder / 'fork-python.log').read_text()[-3000:]}")
    proc.log = log
    return proc, launcher(folder, socket_path)


def stop(proc, timeout: float = 120) -> None:
    """Ends the server by its handle and waits for it (and so for every run it forked)."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except Exception:
        proc.kill()
        proc.wait()
    proc.stdout.close()
    proc.log.close()


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "serve":
        sys.exit(serve(sys.argv[2]))
    if len(sys.argv) >= 3 and sys.argv[1] == "run":
        sys.exit(run(sys.argv[2], sys.argv[3:]))
    sys.exit(__doc__)
