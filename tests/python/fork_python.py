"""A `python` whose start-up skips TensorFlow's import: a server process imports TensorFlow and
Keras once, and every run of the launcher is a fork of it, running the command line as
`python` would. For the benchmark smoke runs (test_benchmarks_smoke.py): their scripts start
child Pythons (bench_startup.py's pair, bench_predict_memory.py's and bench_teardown.py's
children, gpu/run_gpu.sh's three steps), and each paid ~7 CPU seconds of TensorFlow import
that measured nothing there; a fork costs a fraction of a second.

    python fork_python.py serve SOCKET          # imports TensorFlow, prints "ready", serves until SIGTERM
    python -S -E fork_python.py run SOCKET ARGS  # = `python ARGS` (the launcher `launcher()` writes)

ARGS: `-c CODE ...`, `-m MODULE ...`, `SCRIPT ...` or `- ...` (the code on stdin), after any of
`-u`, `-B`; anything else is refused (exit 2, naming it). The run gets the launcher's stdin,
stdout, stderr (passed over the socket), working folder and environment (PYTHONPATH's folders
go first on sys.path, as `python` puts them); its exit status is the launcher's (a signal's
death is 128 + the signal). When the launcher dies (killed by its id, a timeout), the run is
killed. The fork happens before TensorFlow's runtime starts (the server only imports it), so
each run configures its own devices, as a fresh process does.

Only the server's first import is saved: what a run computes is its own. The server waits
for every run it forked before it exits, so their CPU time counts in its parent's (pytest's)
children's time; its log (`fork-python.log` beside the socket) has each run's CPU seconds.
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


def launcher(folder: Path, socket_path: Path) -> Path:
    """An executable `python` in `folder` that runs its arguments in a fork of the server at `socket_path`."""
    path = folder / "python"
    path.write_text(f"#!/bin/sh\nexec {sys.executable} -S -E {Path(__file__).resolve()} run {socket_path} \"$@\"\n")
    path.chmod(0o755)
    return path


# ---------------------------------------------------------------------------- the launcher
def run(socket_path: str, args: list[str]) -> int:
    payload = json.dumps({"args": args, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(socket_path)
    conn.sendall(struct.pack("!I", len(payload)))
    conn.sendmsg([payload], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
    data = b""
    while len(data) < 4:
        chunk = conn.recv(4 - len(data))
        if not chunk:
            print("fork_python: the server ended the run without its exit status", file=sys.stderr)
            return 1
        data += chunk
    return struct.unpack("!i", data)[0]


# ---------------------------------------------------------------------------- the server
def serve(socket_path: str) -> int:
    import keras  # noqa: F401  (what every run would import: the point of the server)
    import tensorflow  # noqa: F401

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(16)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    print("ready", flush=True)
    supervisors: set[int] = set()
    while not stopping:
        ready, _, _ = select.select([listener], [], [], 0.2)
        _reap(supervisors, block=False)
        if not ready:
            continue
        conn, _ = listener.accept()
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
        supervisors.add(pid)
    listener.close()
    os.unlink(socket_path)
    _reap(supervisors, block=True)   # their CPU time reaches the server's parent only once waited for
    return 0


def _reap(pids: set[int], *, block: bool) -> None:
    for pid in list(pids):
        done, _ = os.waitpid(pid, 0 if block else os.WNOHANG)
        if done:
            pids.discard(pid)


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
    pid = os.fork()
    if pid == 0:
        conn.close()
        os._exit(_child(request, fds))
    for fd in fds:
        os.close(fd)
    started = time.perf_counter()
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            code = 128 - code if code < 0 else code
            print(f"{usage.ru_utime + usage.ru_stime:7.1f} CPU s {time.perf_counter() - started:7.1f} s exit {code:3d}  "
                  f"{' '.join(request['args'])[:160]!r}", file=sys.stderr, flush=True)   # the server's log
            try:
                conn.sendall(struct.pack("!i", code))
            except OSError:
                pass
            return 0
        ready, _, _ = select.select([conn], [], [], 0.05)
        if ready and not conn.recv(1):   # the launcher is gone: so is its run
            os.kill(pid, signal.SIGKILL)
            _, _, usage = os.wait4(pid, 0)
            print(f"{usage.ru_utime + usage.ru_stime:7.1f} CPU s {time.perf_counter() - started:7.1f} s killed    "
                  f"{' '.join(request['args'])[:160]!r}", file=sys.stderr, flush=True)
            return 0


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
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    write_through = bool(os.environ.get("PYTHONUNBUFFERED"))
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                                   line_buffering=True, write_through=write_through)
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                                   errors="backslashreplace", line_buffering=True,
                                                   write_through=True)
    args = list(request["args"])
    while args and args[0] in ("-u", "-B"):
        args.pop(0)
    pythonpath = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    base_path = [p for p in sys.path[1:] if p not in pythonpath]
    code = 0
    try:
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
        code = 128 + signal.SIGINT
    except BaseException:  # noqa: BLE001  (as `python` does: the traceback, exit status 1)
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    return code


class _Usage(Exception):
    pass


def start(folder: Path, env: dict) -> tuple:
    """Starts a server (its files in `folder`) and returns (its process, the launcher's path); the
    caller ends it with `stop`."""
    import subprocess

    socket_path = folder / "fork-python.sock"
    log = open(folder / "fork-python.log", "w")  # noqa: SIM115  (closed by stop)
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "serve", str(socket_path)], env=env,
                            stdout=subprocess.PIPE, stderr=log, text=True)
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        proc.wait()
        log.close()
        raise RuntimeError(f"the fork server did not start:\n{(folder / 'fork-python.log').read_text()[-3000:]}")
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
