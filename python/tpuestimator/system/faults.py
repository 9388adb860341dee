"""Fault points for crash tests: make this process die as `kill -9` would, at a chosen place.

Set ``TPUESTIMATOR_FAULT=<phase>@<step>`` (several separated by commas) and the process sends
itself SIGKILL (no cleanup, no `finally`, no atexit; a shell reports 137, `subprocess` -9) the
first time it reaches `phase` at global step `step`. Phases, in the order a training reaches them:

- ``after_loop``: a device loop ended at `step` (metrics read, hooks run), before its checkpoint;
- ``after_checkpoint``: the checkpoint of `step` is on disk, before any evaluation due at it;
- ``after_eval``: the evaluation at `step` is done and recorded, before the exporters run;
- ``in_export``: inside an export of `step`, with its temp folder written but not renamed.

Only tests set it (tests/python/test_kill_recovery.py; the fault-injection suite). Reading an
environment variable is the whole cost when it is unset.
"""
from __future__ import annotations

import logging
import os
import signal

logger = logging.getLogger(__name__)

ENV = "TPUESTIMATOR_FAULT"
PHASES = ("after_loop", "after_checkpoint", "after_eval", "in_export")
RETURN_CODE = -signal.SIGKILL  # what `subprocess` reports for the killed process (a shell: 137)


def fault_point(phase: str, step: int) -> None:
    """Kills this process with SIGKILL when ``TPUESTIMATOR_FAULT`` names `phase` at `step`."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    for item in spec.split(","):
        name, _, at = item.strip().partition("@")
        if name == phase and at.strip().isdigit() and int(at) == int(step):
            logger.error("fault point %s at step %d: killing this process (%s)", phase, step, ENV)
            logging.shutdown()
            os.kill(os.getpid(), signal.SIGKILL)
