"""`RecorderHook`: feeds a `RunRecorder` from the training loop (TensorFlow-free).

- After every training loop: a metrics.json row with the loop's training metrics (``loss`` and
  the model's ``report`` scalars, e.g. ``accuracy``); the recorder moves ``end`` forward and
  keeps the rows bounded (runs/metric_rows.py).
- After every evaluation, BEFORE the exporters run: the evaluation's values (``val_loss``,
  ``val_accuracy``) join the row of the loop it followed, written at once, so a run killed
  during an export still has them (docs/RUN_FORMAT.md, rule 13).
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
    """

    def __init__(self, recorder):
        self.recorder = recorder
        self.train_metrics: dict[str, Any] = {}

    def after_loop(self, step: int, logs: Mapping[str, Any]) -> None:
        self.train_metrics = {k: v for k, v in dict(logs).items() if k not in _NOT_METRICS}
        self.recorder.log_metrics(step, self.train_metrics)

    def after_eval(self, step: int, metrics: Mapping[str, Any]) -> None:
        shown = {k: v for k, v in dict(metrics).items() if k not in _NOT_METRICS}
        # the last loop's training metrics too: an evaluation with no loop before it in this
        # run (a resumed, already finished run) still gets a row with a training value
        self.recorder.log_metrics(step, self.train_metrics, eval_metrics=shown)
