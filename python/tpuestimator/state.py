"""The public training state: everything a built Estimator trains, evaluates and checkpoints.

`Estimator.state` is a `TrainingState` once the model is built (the first `train`,
`evaluate` or `predict`, or `Estimator.build`). Hooks, the debug tools and the checks read
the model, optimizer, global step, checkpoint manager and metrics here, never through the
Estimator's private attributes.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from tpuestimator.spec import ModelSpec


@dataclasses.dataclass
class TrainingState:
    """A built model and what trains it.

    Attributes:
      spec: the `ModelSpec` the model function returned (with the optimizer built, wrapped in
        a `LossScaleOptimizer` under `mixed_float16`).
      model, optimizer: `spec.model` and `spec.optimizer`.
      global_step: the int64 `tf.Variable` counting training steps (checkpointed as `step`).
      checkpoint, manager: the `tf.train.Checkpoint` (model, optimizer, step) and its
        `tf.train.CheckpointManager` in the model dir.
      feature_spec: {feature name: (shape without the batch, dtype name)} of the input.
      train_metrics: {"loss": Mean, "report/<name>": Mean}, read and reset after each loop.
      eval_loss, eval_count: the evaluation's masked mean loss and example count.
      eval_metrics: {name: (keras Metric, None or fn(labels, outputs) -> values)}.
    """

    spec: ModelSpec
    optimizer: Any
    global_step: Any
    checkpoint: Any
    manager: Any
    feature_spec: dict
    train_metrics: dict
    eval_loss: Any
    eval_count: Any
    eval_metrics: dict

    @property
    def model(self):
        return self.spec.model

    @property
    def step(self) -> int:
        """The global step as a Python int (one device read)."""
        return int(self.global_step.numpy())

    @property
    def report_names(self) -> list[str]:
        return list(self.spec.report)

    def latest_checkpoint(self) -> str | None:
        return self.manager.latest_checkpoint

    def sentinel_variables(self) -> list:
        """What the NaN/Inf sentinel checks: the trainable weights and the optimizer's state
        (e.g. Adam's moments, which can overflow while the weights stay finite), so that no
        checkpoint with a non-finite value is ever written."""
        return [*self.model.trainable_variables, *self.optimizer.variables]

    def eval_metric_objects(self) -> list:
        return [self.eval_loss, self.eval_count, *(m for m, _ in self.eval_metrics.values())]
