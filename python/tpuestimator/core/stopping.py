"""Hooks that stop training or save checkpoints at loop boundaries.

`EarlyStoppingHook` is the one early-stopping implementation: in process by default, and
persisted across restarts with `state_path` (how `train_and_evaluate` runs the config's
`eval.early_stopping`, in `<model_dir>/early_stopping.json`). `improved` is the comparison
the exporters share.
"""
from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Mapping
from typing import Any

from tpuestimator.core.hooks import Hook
from tpuestimator.errors import ConfigError
from tpuestimator.system.io import atomic_write_json

logger = logging.getLogger(__name__)


def improved(value: float | None, best: float | None, mode: str, min_delta: float = 0.0) -> bool:
    """Whether `value` beats `best` by more than `min_delta` (`mode` 'min' or 'max'); NaN never does."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    if best is None:
        return True
    return value < best - min_delta if mode == "min" else value > best + min_delta


def read_state(path: str) -> dict:
    """A small JSON state file, or {} when missing or unreadable."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


class EarlyStoppingHook(Hook):
    """Stops training when `monitor` has not improved by `min_delta` for `patience` evaluations.

    Runs on `after_eval` and stops by flag (`stop_training`); `train_and_evaluate` then ends
    without another loop. The first evaluation sets the baseline; with `patience=2` training
    stops at the 3rd evaluation after the best one.

    Args:
      monitor: an eval metric name (``loss``, ``accuracy``, ...).
      mode: ``min``, ``max``, or ``auto`` (``min`` for names holding loss/error, else ``max``).
      patience: evaluations without improvement that are tolerated.
      min_delta: the smallest change that counts as an improvement.
      baseline: an initial best value to beat (None: the first evaluation).
      state_path: a JSON file keeping best value and bad evaluations across restarts (read
        when it records the same monitor and mode, written atomically after each evaluation).
      field: the config key named when `monitor` is not an evaluation metric (a `ConfigError`
        then, instead of a `KeyError`).

    Attributes:
      best, best_step: the best value and its global step.
      bad_evals: evaluations since the last improvement.
      stopped_step: the global step at which it asked to stop, or None.
    """

    def __init__(self, monitor: str = "loss", mode: str = "auto", patience: int = 3, min_delta: float = 0.0,
                 baseline: float | None = None, state_path: str | None = None, field: str | None = None):
        if mode == "auto":
            mode = "min" if ("loss" in monitor or "error" in monitor) else "max"
        if mode not in ("min", "max"):
            raise ValueError(f"EarlyStoppingHook: `mode` ({mode!r}) must be 'min', 'max' or 'auto'.")
        if not isinstance(patience, int) or patience < 0:
            raise ValueError(f"EarlyStoppingHook: `patience` ({patience!r}) must be an integer >= 0.")
        if min_delta < 0:
            raise ValueError(f"EarlyStoppingHook: `min_delta` ({min_delta!r}) must be >= 0.")
        self.monitor = monitor
        self.mode = mode
        self.patience = patience
        self.min_delta = float(min_delta)
        self.best: float | None = baseline
        self.best_step: int | None = None
        self.bad_evals = 0
        self.evals = 0
        self.stopped_step: int | None = None
        self.state_path = state_path
        self.field = field
        if state_path:
            state = read_state(state_path)
            if state.get("metric") == monitor and state.get("mode") == mode:
                self.best, self.bad_evals = state.get("best"), state.get("bad_evals", 0)
                self.best_step = state.get("best_step")

    def after_eval(self, step: int, metrics: Mapping[str, Any]) -> None:
        self.update(step, metrics)

    def update(self, step: int, metrics: Mapping[str, Any]) -> bool:
        """Records an evaluation; True when training should stop."""
        if self.monitor not in metrics:
            if self.field:
                raise ConfigError(self.field, self.monitor,
                                  "one of the evaluation's metrics: " + ", ".join(sorted(metrics)))
            raise KeyError(f"EarlyStoppingHook monitors `{self.monitor}` but the evaluation returned "
                           f"{sorted(metrics)}; pass one of them as `monitor`.")
        value = metrics[self.monitor]
        self.evals += 1
        if improved(value, self.best, self.mode, self.min_delta):
            self.best, self.best_step, self.bad_evals = value, step, 0
        else:
            self.bad_evals += 1
        if self.state_path:
            atomic_write_json(self.state_path, {"metric": self.monitor, "mode": self.mode, "best": self.best,
                                                "best_step": self.best_step, "bad_evals": self.bad_evals,
                                                "step": step})
        stop = self.bad_evals > self.patience
        if stop and not self.stop_training:
            self.stop_training = True
            self.stopped_step = step
            logger.info("early stopping at step %d: %s has not improved on %s (step %s) for %d evaluations",
                        step, self.monitor, self.best, self.best_step, self.bad_evals)
        return stop


class CheckpointSaverHook(Hook):
    """Saves a checkpoint every `every_n_steps` steps and/or `every_n_secs` seconds.

    Saves happen at loop boundaries (the host wakes only there), through
    `Estimator.save_checkpoint()`, so they join the same `CheckpointManager` (and its
    `keep_checkpoint_max`) as the Estimator's own saves. A checkpoint already written at the
    current step is not written again. With the NaN/Inf sentinel on (the default) a loop that
    went non-finite raises before `after_loop`, so this hook never saves NaN weights.
    """

    def __init__(self, every_n_steps: int | None = None, every_n_secs: float | None = None):
        if not every_n_steps and not every_n_secs:
            raise ValueError("CheckpointSaverHook needs `every_n_steps` or `every_n_secs` (a positive number).")
        for name, value in (("every_n_steps", every_n_steps), ("every_n_secs", every_n_secs)):
            if value is not None and (not isinstance(value, (int, float)) or value <= 0 or
                                      (isinstance(value, float) and not math.isfinite(value))):
                raise ValueError(f"CheckpointSaverHook: `{name}` ({value!r}) must be a positive number or None.")
        self.every_n_steps = every_n_steps
        self.every_n_secs = every_n_secs
        self.saved: list[str] = []
        self._last_step: int | None = None
        self._last_time = time.monotonic()

    def begin(self, step, info):
        if self._last_step is None:
            self._last_step = step
            self._last_time = time.monotonic()

    def after_loop(self, step, logs):
        due = False
        if self.every_n_steps and step // self.every_n_steps > (self._last_step or 0) // self.every_n_steps:
            due = True
        if self.every_n_secs and time.monotonic() - self._last_time >= self.every_n_secs:
            due = True
        if not due:
            return
        latest = self.estimator.latest_checkpoint()
        if latest and latest.rsplit("-", 1)[-1] == str(step):
            path = latest
        else:
            path = self.estimator.save_checkpoint()
            self.saved.append(path)
        self._last_step = step
        self._last_time = time.monotonic()
