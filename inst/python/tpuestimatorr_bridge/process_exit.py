"""Python's exit handlers when R ends the process.

reticulate 1.28 (Debian's) never finalizes the Python it embeds: when R quits, the process
ends without running Python's `atexit` handlers. What they would have cleaned up stayed
behind: every R session that trained a model left AutoGraph's generated source files in the
temporary folder (TensorFlow removes them at exit; two per table training), and the core's own
handlers (TensorBoard servers started from Python, a cluster task's scratch folder) never ran.

The R package arms this once Python runs (`arm_exit_handlers`) and, from an R finalizer that
runs when R exits (`reg.finalizer(onexit = TRUE)`), calls `run_exit_handlers`: Python's
handlers, in their usual order, each once. When Python owns the process instead (R embedded
in Python through rpy2, whose `endr` ends R from Python's own exit), Python is already running
its handlers when R's finalizer comes: then nothing is run a second time. The mark that tells
the two apart is a handler registered after rpy2's (handlers run last registered first), so it
is set before R ends.
"""

from __future__ import annotations

import atexit

_armed = False
_python_exiting = False


def _mark_python_exiting() -> None:
    global _python_exiting
    _python_exiting = True


def arm_exit_handlers() -> None:
    """Registers the mark of a Python exit (once); called when the R package starts Python."""
    global _armed
    if not _armed:
        atexit.register(_mark_python_exiting)
        _armed = True


def run_exit_handlers() -> bool:
    """Runs Python's exit handlers now, as a Python exit would, unless Python is exiting
    already (R ended from Python's exit: they run there). True when they ran here.
    `atexit._run_exitfuncs` clears them, so none runs twice."""
    if _python_exiting:
        return False
    atexit._run_exitfuncs()
    return True
