"""Ctrl-C while the R package runs a Python job: one KeyboardInterrupt, never a broken unwind.

reticulate 1.28 (Debian's) installs a C-level SIGINT handler that sets R's "interrupt pending"
flag and trips Python's, and a Python-level handler (``rpytools.signals``) that asks R whether
the interrupt is still pending by calling an R function. While a job calls R back hundreds of
times a second (progress, hooks, model functions), that design fails in two ways, both seen
as a flaky Ctrl-C test (a run recorded "failed" or never ended):

- the Python handler's call into R runs R code with the interrupt pending, so R may take the
  interrupt inside reticulate's call machinery: Python then gets ``RuntimeError: (Unknown
  exception occurred)`` instead of KeyboardInterrupt, or (read from reticulate's code, the
  one run that never ended) a C++ exception unwinds straight through the Python frames back
  to R, skipping every ``finally``;
- a Ctrl-C that lands while R code reticulate runs around an R callback (argument and result
  conversions, its ``tryCatch`` wrappers) does the same.

`r_interrupts_held` closes both: for the duration of a bridge call, R's interrupts are
suspended (R's own ``suspendInterrupts`` mechanism), so R takes a Ctrl-C only where the R
package's callback wrapper re-allows it (``allowInterrupts`` inside its ``tryCatch``, which
turns it into a marker the bridge raises as KeyboardInterrupt); everywhere else reticulate's
Python handler takes it, its question to R answered from R's flags instead of by running R
code. While an R callback allows R's interrupts, Python code that R runs meanwhile (R calling
Python) leaves a Ctrl-C to R: a long Python call made from an R callback is not cut short, R
takes the Ctrl-C when it returns. A KeyboardInterrupt that Python's handler raised inside a
finalizer or weakref callback (where Python can only print it) is sent again, so it is never
lost. While the core starts a child process (`tpuestimator.system.processes.sigint_held`: a
cluster's task, TensorBoard), a Ctrl-C is left pending in R and taken when the child is held.
Both flags are plain ints exported by libR, read and written here through ctypes. Outside R
(no libR symbols), or when reticulate's handler is not the one installed, nothing is changed.
"""

from __future__ import annotations

import _thread
import contextlib
import ctypes
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

# The module of the Python-level SIGINT handler reticulate installs when it starts Python.
RETICULATE_HANDLER_MODULE = "rpytools.signals"


class RInterruptFlags:
    """R's ``R_interrupts_pending`` and ``R_interrupts_suspended`` (ints exported by libR)."""

    def __init__(self, pending: ctypes.c_int, suspended: ctypes.c_int):
        self._pending = pending
        self._suspended = suspended

    @property
    def pending(self) -> bool:
        return bool(self._pending.value)

    @pending.setter
    def pending(self, value: bool) -> None:
        self._pending.value = int(bool(value))

    @property
    def suspended(self) -> bool:
        return bool(self._suspended.value)

    @suspended.setter
    def suspended(self, value: bool) -> None:
        self._suspended.value = int(bool(value))


_FLAGS: list[RInterruptFlags | None] = []  # [] before the first lookup, then [flags or None]


def r_interrupt_flags() -> RInterruptFlags | None:
    """R's interrupt flags in this process, or None where R is not loaded."""
    if not _FLAGS:
        _FLAGS.append(_find_flags())
    return _FLAGS[0]


def _find_flags() -> RInterruptFlags | None:
    candidates: list[tuple[str | None, int]] = [(None, 0)]  # the process's global symbols (R's executable)
    r_home = os.environ.get("R_HOME")
    if r_home:  # libR loaded without RTLD_GLOBAL (R embedded in Python): that library, never a new load
        candidates.append((os.path.join(r_home, "lib", "libR.so"), os.RTLD_NOLOAD))
    for name, mode in candidates:
        try:
            lib = ctypes.CDLL(name, mode=mode)
            return RInterruptFlags(ctypes.c_int.in_dll(lib, "R_interrupts_pending"),
                                   ctypes.c_int.in_dll(lib, "R_interrupts_suspended"))
        except (OSError, ValueError):
            continue
    return None


def _reticulate_signals() -> Any:
    """reticulate's ``rpytools.signals`` module when its handler is the one installed, else None."""
    handler = signal.getsignal(signal.SIGINT)
    if getattr(handler, "__module__", None) != RETICULATE_HANDLER_MODULE:
        return None
    module = sys.modules.get(RETICULATE_HANDLER_MODULE)
    return module if callable(getattr(module, "_callback", None)) else None


@contextlib.contextmanager
def r_interrupts_held() -> Iterator[None]:
    """R's interrupts suspended and reticulate's Python handler kept from calling R for the
    duration (see the module's docstring); both restored on the way out, before the call returns
    to R, so a KeyboardInterrupt that leaves reaches R as R's own interrupt condition."""
    flags = r_interrupt_flags()
    signals = _reticulate_signals()
    if (flags is None or signals is None or flags.suspended
            or threading.current_thread() is not threading.main_thread()):
        # not under reticulate's handlers, or R code suspended interrupts itself: as they are
        yield
        return
    asks_r = signals._callback
    from tpuestimator.system.processes import sigint_deferred

    def pending_in_r(reset: bool) -> bool:
        # What reticulate's handler asks R (its py_interrupts_pending), answered from R's flags
        # without running R code. Pending: R has not taken this Ctrl-C, so Python does and R must
        # not take it again (reset). Not pending: R took it inside an R callback, raised there.
        # Not signal.signal(): that would also replace reticulate's C-level handler, which is
        # what sets R's flag, for the rest of the R session.
        if reset:
            flags.pending = False
            return False
        # R's interrupts are allowed inside the held region only inside an R callback's
        # allowInterrupts: R takes this Ctrl-C itself at its next check there. Python code that
        # R runs meanwhile (an R callback calling Python) leaves it to R, so the callback is cut
        # short by R, as docs/training.md says, and never by an error from inside its Python call.
        pending = flags.pending and flags.suspended
        if pending and sigint_deferred():
            # The core is starting a child process (a cluster's task, TensorBoard): R's flag stays
            # set and this handler is called again when the child is held (processes.py)
            return False
        return pending

    previous_unraisable_hook = sys.unraisablehook

    def send_lost_ctrl_c_again(unraisable: Any) -> None:
        # Python runs its signal handlers wherever its code runs, finalizers and weakref callbacks
        # (TensorFlow's WeakKeyDictionary entries, dropped as the job runs) included; a
        # KeyboardInterrupt raised there only reaches this hook, printed as "Exception ignored",
        # and the Ctrl-C would be lost (R's flag already reset). Pending again in R, and in Python
        # from a new thread, not waited for (from this one, os.kill and interrupt_main run the
        # handler at once, inside this hook; threading.Thread.start waits on a lock, where the
        # handler runs too), it lands in the job's own code at Python's next check.
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            flags.pending = True
            _thread.start_new_thread(_thread.interrupt_main, (signal.SIGINT,))
            return
        previous_unraisable_hook(unraisable)

    signals._callback = pending_in_r
    sys.unraisablehook = send_lost_ctrl_c_again
    flags.suspended = True
    try:
        yield
    finally:
        flags.suspended = False
        sys.unraisablehook = previous_unraisable_hook
        signals._callback = asks_r


def r_interruptible(fn: F) -> F:
    """A bridge function run under `r_interrupts_held`."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        with r_interrupts_held():
            return fn(*args, **kwargs)

    return call  # type: ignore[return-value]
