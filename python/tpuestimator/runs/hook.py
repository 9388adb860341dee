"""`RecorderHook`: feeds a `RunRecorder` from the training loop (TensorFlow-free).

- After every training loop: remembers the loop's training metrics (``loss`` and the model's
  ``report`` scalars, e.g. ``accuracy``) and moves the run's ``end`` forward (`heartbeat`).
- After every evaluation, BEFORE the exporters run: one metrics.json row with the last loop's
  training metrics beside the evaluation's (``loss``/``val_loss``, ``accuracy``/``val_accuracy``),
  so a run killed during an export still has the row (docs/RUN_FORMAT.md, rule 13).
- Without evaluation data: one row per training loop.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tpuestimator.core.hooks import Hook

# Loop logs that are speeds or counts, not metrics.
_NOT_METRICS = {"steps", "steps_per_sec", "examples_per_sec", "global_step", "num_examples", "step"}


class RecorderHook(Hook):
    """Writes metric rows and heartbeats of a run record during training.

    Args:
      recorder: the `RunRecorder`.
      has_eval: whether the job evaluates (rows per evaluation) or not (rows per loop).
    """

    def __init__(self, recorder, *, has_eval: bool):
        self.recorder = recorder
        self.has_eval = has_eval
        self.train_metrics: dict[str, Any] = {}

    def after_loop(self, step: int, logs: Mapping[str, Any]) -> None:
        self.train_metrics = {k: v for k, v in dict(logs).items() if k not in _NOT_METRICS}
        if self.has_eval:
            self.recorder.heartbeat(step)
        else:
            self.recorder.log_metrics(step, self.train_metrics)

    def after_eval(self, step: int, metrics: Mapping[str, Any]) -> None:
        shown = {k: v for k, v in dict(metrics).items() if k not in _NOT_METRICS}
        self.recorder.log_metrics(step, self.train_metrics, eval_metrics=shown)
