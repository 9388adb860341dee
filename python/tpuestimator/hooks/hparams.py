"""`HParamsHook`: TensorBoard's HParams dashboard entry of a run (hyperparameters + final metrics).

`SummaryHook` writes the curves (`<logdir>/train`, `<logdir>/eval`); this hook adds, when
training ends (`close()`, called by `run_job` after the final evaluation), the session's
hyperparameters and the last evaluation's metrics through
`tpuestimator.runs.tensorboard.write_hparams`, so the HParams dashboard compares the runs of a
runs folder by hyperparameter.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from tpuestimator.core.hooks import Hook

logger = logging.getLogger(__name__)


class HParamsHook(Hook):
    """Writes the HParams session (flags + final eval metrics) into `logdir` at `close()`.

    Args:
      logdir: the run's TensorBoard log folder (`<run>/logs`).
      flags: the hyperparameters (nested dicts are flattened to dotted keys).
      trial_id: the session's name (default: the run folder's name).
    """

    def __init__(self, logdir: str, flags: Mapping[str, Any], *, trial_id: str | None = None):
        self.logdir = os.fspath(logdir)
        self.flags = dict(flags)
        self.trial_id = trial_id
        self.metrics: dict | None = None
        self.step = 0
        self.written = False

    def after_eval(self, step, metrics):
        self.metrics = dict(metrics)
        self.step = step

    def end(self, step, logs):
        self.step = max(self.step, step)

    def close(self):
        if self.written:
            return
        from tpuestimator.runs.tensorboard import write_hparams

        metrics = {k: v for k, v in (self.metrics or {}).items() if k not in ("global_step", "num_examples")}
        try:
            write_hparams(self.logdir, self.flags, metrics, trial_id=self.trial_id, step=self.step)
            self.written = True
        except Exception:  # noqa: BLE001 - a dashboard entry must not fail a finished job
            logger.exception("could not write the HParams summary into %s", self.logdir)
