"""Copying a job's `tpuestimator` log into its run record's output.log."""
from __future__ import annotations

import contextlib
import logging
from pathlib import Path


class ToRootHandlers(logging.Handler):
    """Passes records on to the root logger's handlers (used while `propagate` is off)."""

    def emit(self, record: logging.LogRecord) -> None:
        for handler in logging.getLogger().handlers:
            if record.levelno >= handler.level:
                handler.handle(record)


class LogFileHandler(logging.FileHandler):
    """A FileHandler that stops writing after its first failure (a full disk) instead of printing
    a `--- Logging error ---` traceback for every later record."""

    failed = False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.failed:
            super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        self.failed = True


@contextlib.contextmanager
def capture_log(path: Path | None):
    """Copies the `tpuestimator` log of this job, INFO and up, into the run's output.log.

    The console keeps the level the application chose: when that is above INFO, records
    reach the root handlers only from that level (no INFO lines appear that were not asked for).
    """
    if path is None:
        yield
        return
    handler = LogFileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("tpuestimator")
    old_level, old_propagate = root.level, root.propagate
    effective = root.getEffectiveLevel()
    forward = None
    root.addHandler(handler)
    if effective > logging.INFO:
        root.setLevel(logging.INFO)
        root.propagate = False
        forward = ToRootHandlers(level=effective)
        root.addHandler(forward)
    try:
        yield
    finally:
        root.removeHandler(handler)
        if forward is not None:
            root.removeHandler(forward)
        root.setLevel(old_level)
        root.propagate = old_propagate
        handler.close()
