"""Processes: whether the one that wrote a lock or a run record still runs, and starting a
child that a Ctrl-C cannot orphan.

A model-dir lock (`model_dir_lock`) and a run record's owner file (`runs/reading`) both name
their process by host, pid and start time; a pid alone is not enough, as Linux reuses pids.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path


def process_start_time(pid: int) -> float | None:
    """Epoch seconds at which process `pid` started (Linux /proc), None if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])
        btime = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                     if line.startswith("btime"))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def process_alive(host, pid, started) -> bool:
    """Whether process `pid` on `host` (this host only: False elsewhere) still runs and is the
    one that started at epoch seconds `started` (None: not checked)."""
    if host != socket.gethostname() or not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, owned by another user
    now_started = process_start_time(pid)
    # A pid reused by a process that started after the owner wrote its file is not the owner.
    return now_started is None or not isinstance(started, (int, float)) or now_started <= started + 2.0


class _EmbeddedHold:
    """The `sigint_held()` blocks under way (main thread) and whether an embedding's SIGINT
    handler deferred a Ctrl-C meanwhile (`sigint_deferred`)."""

    depth = 0
    deferred = False


@contextlib.contextmanager
def sigint_held() -> Iterator[None]:
    """Holds a Ctrl-C (SIGINT) back until the block ends, then raises it (KeyboardInterrupt).

    For starting a child process and keeping hold of it: Python raises KeyboardInterrupt between
    any two bytecodes, and one inside `subprocess.Popen` (the child forked, its pid not yet
    returned) or before the caller has stored the Popen leaves a running child that nothing
    stops (a local cluster's task outlived a Ctrl-C so).

    Where SIGINT has Python's own default handler (the CLI, a Python session), the block runs
    with a handler that only notes the Ctrl-C. Any other handler is left in place: reticulate's
    (R) has a C-level half that `signal.signal` would replace for the rest of the R session. Such
    a handler holds the Ctrl-C itself if it asks `sigint_deferred()` (the R bridge's does), and
    is called again when the block ends. An ignored SIGINT stays ignored; outside the main
    thread, where no handler runs, nothing is held.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # no handler runs here, and none can be set
        return
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        with _held_by_the_handler():
            yield
        return
    received: list = []
    signal.signal(signal.SIGINT, lambda signum, frame: received.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if received:  # also when the block raised: the Ctrl-C is not lost behind its error
            signal.default_int_handler(signal.SIGINT, received[0])


@contextlib.contextmanager
def _held_by_the_handler() -> Iterator[None]:
    _EmbeddedHold.depth += 1
    try:
        yield
    finally:
        _EmbeddedHold.depth -= 1
        if not _EmbeddedHold.depth and _EmbeddedHold.deferred:
            _EmbeddedHold.deferred = False
            handler = signal.getsignal(signal.SIGINT)
            if callable(handler):  # it finds its Ctrl-C still pending, and raises it now
                handler(signal.SIGINT, None)


def sigint_deferred() -> bool:
    """For an embedding's own SIGINT handler (the R bridge's, under reticulate's): True while a
    `sigint_held()` block runs, and the handler should then leave the Ctrl-C pending; the block
    calls the handler again at its end. False otherwise: the handler acts at once."""
    if _EmbeddedHold.depth and threading.current_thread() is threading.main_thread():
        _EmbeddedHold.deferred = True
        return True
    return False
