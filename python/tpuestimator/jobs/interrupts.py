"""SIGTERM / SIGINT during a training job: finish the loop, save a checkpoint, stop.

A preempted VM (or a scheduler, or Ctrl-C) sends SIGTERM/SIGINT. Python's default ends the
process at once (exit 143) with everything since the last periodic checkpoint lost. With
`StopOnSignal` installed (`run_job(handle_signals=True)`; the CLI's `train` and `tune` do it):

1. the first SIGTERM or SIGINT sets THE stop flag of the hook protocol (the Estimator's
   `stop_training`, through this hook's `stop_training`) and logs what happens next;
2. the current device loop finishes, the controller saves a checkpoint at that step (it
   always saves at the end of a `train` call) and waits for it to be on disk;
3. the hook's `end` raises `TrainingInterrupted` (no evaluation, no export: a preempted VM
   has seconds); `run_job` marks the run record interrupted (``interrupted`` property,
   no error.json) and re-raises; the CLI exits with `EXIT_CODES` (143 for SIGTERM, 130 for
   SIGINT, the shell's 128 + signal number);
4. a rerun resumes from that checkpoint.

A second signal aborts at once: Python runs the handler as soon as the current TensorFlow
call returns (a device loop cannot be cut short from Python), the run is marked interrupted
and the process exits with the same code, without a new checkpoint.

Handlers are installed only from the main thread (Python's rule) and only where the caller
asks: the CLI does; `run_job()` called from a library user's program or from R does not
by default, so their own handlers (R's interrupt handling included) stay in charge. Under
R, Ctrl-C reaches Python as `KeyboardInterrupt`; `run_job` records the run as interrupted.

Why a flag and not `tf.distribute.experimental.PreemptionCheckpointHandler`: that handler
needs a cluster resolver and a `MultiWorkerMirroredStrategy`/`TPUStrategy` (it agrees on a
step across workers through the coordination service) and a `CheckpointManager` of its own
driving the training loop. On one host the flag does the same work in one process: the
loop already ends at a step where the checkpoint is consistent. Multi-worker jobs should
use it (the workers must save at the same step).
"""
from __future__ import annotations

import logging
import signal
import threading
from typing import Any

from tpuestimator.core.hooks import Hook
from tpuestimator.errors import TPUEstimatorError

logger = logging.getLogger(__name__)

HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# The shell's convention, 128 + the signal's number: what the process would have exited
# with had the signal killed it, so schedulers and scripts read it the same way.
EXIT_CODES = {signal.SIGTERM: 143, signal.SIGINT: 130}


class TrainingInterrupted(TPUEstimatorError):
    """A training job stopped on SIGTERM/SIGINT (or an interrupt from R).

    Attributes:
      signal_name: ``SIGTERM``, ``SIGINT`` or ``KeyboardInterrupt``.
      exit_code: what the CLI exits with (143, 130).
      step: the global step of the checkpoint it saved (None when it aborted without one).
      checkpoint: the latest checkpoint on disk, which a rerun resumes from (None if none).
      aborted: True when a second signal stopped it before a checkpoint could be saved.
    """

    def __init__(self, message: str, *, signal_name: str, exit_code: int, step: int | None,
                 checkpoint: str | None, aborted: bool = False):
        self.signal_name = signal_name
        self.exit_code = exit_code
        self.step = step
        self.checkpoint = checkpoint
        self.aborted = aborted
        super().__init__(message)


class StopOnSignal(Hook):
    """Turns SIGTERM/SIGINT into the stop flag (module docstring). `install()` /
    `restore()` around the job; add the hook to the job's hooks."""

    def __init__(self):
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    # ------------------------------------------------------------------ handlers
    def install(self) -> bool:
        """Installs the handlers; False (nothing installed) outside the main thread."""
        if threading.current_thread() is not threading.main_thread():
            logger.debug("Not in the main thread: SIGTERM/SIGINT keep their handlers.")
            return False
        for sig in HANDLED_SIGNALS:
            previous = signal.getsignal(sig)
            if previous is None:  # installed from C (an embedding program): not ours to replace
                continue
            self._previous[sig] = previous
            signal.signal(sig, self._handle)
        return bool(self._previous)

    def restore(self) -> None:
        """Puts the previous handlers back (safe to call twice)."""
        previous, self._previous = self._previous, {}
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, frame) -> None:
        if self.received is not None:
            self.restore()
            logger.warning("%s received again: aborting now, without a new checkpoint.", signal.Signals(signum).name)
            raise KeyboardInterrupt
        self.received = signum
        logger.warning("%s received: finishing the current device loop, saving a checkpoint and stopping (send "
                       "SIGINT again to abort without it).", signal.Signals(signum).name)
        # Only the flag here: the hook events set the stop flag at the next loop boundary. Set
        # between two `train` calls it would make the next one return at once, untrained, and
        # the job would end as if the input had ended.

    # ------------------------------------------------------------------ hook events
    def begin(self, step, info) -> None:
        if self.received is not None:
            self.stop_training = True

    def after_loop(self, step, logs) -> None:
        if self.received is not None:
            self.stop_training = True

    def end(self, step, logs) -> None:
        # The controller has saved the checkpoint at `step` and waited for it.
        if self.received is not None:
            raise self.interrupted(step)

    def before_eval(self, step) -> None:
        # Training paused for an evaluation with the checkpoint at `step` on disk: stop before it.
        if self.received is not None:
            raise self.interrupted(step)

    def after_eval(self, step, metrics) -> None:
        # A signal during an evaluation: the checkpoint at `step` was saved before it.
        if self.received is not None:
            raise self.interrupted(step)

    # ------------------------------------------------------------------ the error
    @property
    def signal_name(self) -> str | None:
        return None if self.received is None else signal.Signals(self.received).name

    def interrupted(self, step: int | None, *, aborted: bool = False) -> TrainingInterrupted:
        """The `TrainingInterrupted` for the signal received (SIGINT when none was)."""
        sig = self.received if self.received is not None else signal.SIGINT
        name = signal.Signals(sig).name
        checkpoint = None
        if self.estimator is not None:
            try:
                checkpoint = self.estimator.latest_checkpoint()
            except Exception:  # the model dir may be half set up when an abort comes early
                checkpoint = None
        if aborted:
            message = (f"Training aborted by a second signal ({name}) without a new checkpoint; a rerun of the same "
                       f"command resumes from {checkpoint or 'the start (no checkpoint was saved)'}.")
        else:
            message = (f"Training stopped by {name} at global step {step}: checkpoint {checkpoint} saved. Run the same "
                       "command again to resume from it.")
        return TrainingInterrupted(message, signal_name=name, exit_code=EXIT_CODES[sig],
                                   step=None if aborted else step, checkpoint=checkpoint, aborted=aborted)
