"""Exceptions a user can cause, each naming the field or file, the value and the fix.

The R package maps these class names onto R condition classes
(`tpuestimator_config_error`, ...), so keep the names stable.
"""
from __future__ import annotations

import contextlib
import contextvars


class TPUEstimatorError(Exception):
    """Base class of every error tpuestimator raises on purpose."""


class ConfigError(TPUEstimatorError, ValueError):
    """A configuration field holds a value that is not allowed.

    Attributes:
      field: dotted path of the field (``train.batch_size``).
      value: the offending value.
      allowed: what would be accepted.
      unknown: the field does not exist (a misspelt key): the message names the field and the
        valid ones, not a value.
    """

    def __init__(self, field: str, value, allowed: str, *, source: str | None = None, unknown: bool = False):
        self.field = field
        self.value = value
        self.allowed = allowed
        self.source = source
        where = f" in {source}" if source else ""
        if unknown:  # the field itself is wrong: its value says nothing
            super().__init__(f"`{field}`{where} is not a known config field. Expected: {allowed}.")
        else:
            super().__init__(f"`{field}`{where} is invalid. Received: {field}={value!r}. Expected: {allowed}.")


class DataError(TPUEstimatorError, ValueError):
    """Input data cannot be read as configured (missing files, corrupt or mis-shaped records)."""

    def __init__(self, message: str, *, path: str | None = None, record: int | None = None,
                 feature: str | None = None):
        self.path = path
        self.record = record
        self.feature = feature
        super().__init__(message)


class ModelFnError(TPUEstimatorError, TypeError):
    """A model function broke the model-function contract."""


class NonFiniteError(TPUEstimatorError, FloatingPointError):
    """Training produced a NaN or Inf loss, gradient or weight and was stopped.

    Attributes:
      step: the global step at the end of the loop that went non-finite.
      what: which value went non-finite (``loss``, ``weights``).
      last_good_checkpoint: path of the last finite checkpoint, or None.
      report_path: where the report and repro bundle were written, or None.
      loop_start: the global step the failed loop started from (None if unknown).
      loss: the failed loop's mean loss (None if unknown).
    """

    def __init__(self, message: str, *, step: int, what: str, last_good_checkpoint: str | None = None,
                 report_path: str | None = None, loop_start: int | None = None, loss: float | None = None):
        self.loop_start = loop_start
        self.loss = loss
        self.step = step
        self.what = what
        self.last_good_checkpoint = last_good_checkpoint
        self.report_path = report_path
        super().__init__(message)


class DiskFullError(TPUEstimatorError, OSError):
    """The disk (or quota) ran out while writing a checkpoint, an export or a run record.

    Nothing half-written is left behind; the message says what was saved and what was not.

    Attributes:
      path: the folder being written.
      free_bytes: the space left on its filesystem (None if unknown).
      what: what was being written (``checkpoint``, ``export``, ``run record``).
      last_good_checkpoint: the newest complete checkpoint, or None.
      saved: {what: path} of the results that were written before the disk filled.
    """

    def __init__(self, message: str, *, path: str, what: str, free_bytes: int | None = None,
                 last_good_checkpoint: str | None = None, saved: dict | None = None):
        self.path = path
        self.what = what
        self.free_bytes = free_bytes
        self.last_good_checkpoint = last_good_checkpoint
        self.saved = dict(saved or {})
        super().__init__(message)


class TPUUnavailableError(TPUEstimatorError, RuntimeError):
    """`run.strategy: tpu` was asked for but no TPU could be reached."""


class CompatibilityError(TPUEstimatorError, ValueError):
    """`tpuestimator check` found something that would not run on a TPU."""


class ClusterTaskError(TPUEstimatorError, RuntimeError):
    """A task of a local cluster (`tpuestimator cluster`, R's `tpu_train(cluster = ...)`)
    failed: `task` (e.g. 'worker 1'), its `returncode` and `last_lines`."""

    def __init__(self, task: str, returncode: int, last_lines=(), restarts: int = 0):
        self.task, self.returncode, self.last_lines, self.restarts = task, returncode, tuple(last_lines), restarts
        tail = "\n".join(f"  [{task}] {line}" for line in self.last_lines[-15:])
        super().__init__(f"{task} failed (exit {returncode}); the cluster was stopped"
                         + (f" after {restarts} restart(s)" if restarts else "") + f". Its last lines:\n{tail}")


# The front end a fix in an error or a note is written for: "python" (keyword arguments, the
# default), "r" (R's arguments: the R bridge sets it) or "cli" (flags: the CLI sets it), so
# that each user reads the fix as they would type it.
SYNTAXES = ("python", "r", "cli")
_message_syntax: contextvars.ContextVar[str] = contextvars.ContextVar("tpuestimator_message_syntax",
                                                                       default="python")


@contextlib.contextmanager
def message_syntax(syntax: str):
    """Errors and notes raised or logged inside are written in `syntax` (one of `SYNTAXES`)."""
    if syntax not in SYNTAXES:
        raise ValueError(f"syntax={syntax!r}: one of {', '.join(SYNTAXES)}")
    token = _message_syntax.set(syntax)
    try:
        yield
    finally:
        _message_syntax.reset(token)


def current_syntax() -> str:
    """The syntax fixes are written in here (`message_syntax`)."""
    return _message_syntax.get()
