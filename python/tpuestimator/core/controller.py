"""The outer training loop, in the style of Orbit's `Controller`.

`Estimator.train` checks its arguments, builds the model and hands the rest to
`TrainController.run`: loops of `iterations_per_loop` device steps, with the cadence of
everything the host does between them declared in one `Cadence` (loop size, boundaries hooks
ask for, checkpoints) and the per-loop actions in a fixed order:

    before_loop hooks -> device loop -> read metrics -> NaN/Inf sentinel -> after_loop hooks
    -> checkpoint when due -> stop when asked or when the input ended

Evaluation and export cadence is one level up, in `tpuestimator.core.training.train_and_evaluate`,
and declared here too: `EvalCadence` (the training segments' ends, when an evaluation is due).
"""
from __future__ import annotations

import dataclasses
import logging
import math
import time

from tpuestimator.errors import NonFiniteError
from tpuestimator.system.faults import fault_point

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Cadence:
    """When the host acts: loop size and checkpoint interval (steps)."""

    iterations_per_loop: int
    save_checkpoints_steps: int | None

    @classmethod
    def from_config(cls, config) -> Cadence:
        return cls(config.iterations_per_loop, config.save_checkpoints_steps)

    def loop_size(self, step: int, target: int | None, hooks) -> int:
        """Steps in the next device loop: `iterations_per_loop`, capped at the target and at
        the next boundary a hook asks for (`Hook.steps_to_boundary`: profiler, dumps)."""
        n = self.iterations_per_loop if target is None else min(self.iterations_per_loop, target - step)
        cap = hooks.steps_to_boundary(step)
        return min(n, int(cap)) if cap else n

    def checkpoint_due(self, step: int, last_saved: int) -> bool:
        every = self.save_checkpoints_steps
        return bool(every) and step // every > last_saved // every


@dataclasses.dataclass(frozen=True)
class EvalCadence:
    """When `train_and_evaluate` evaluates (and so runs its exporters and early stopping):
    whenever the global step reaches a multiple of `every_n_steps` (None: never in between),
    at `max_steps`, when a hook asked to stop, and once at the end unless the last evaluation
    was at the final step."""

    every_n_steps: int | None
    max_steps: int | None

    def segment_end(self, step: int) -> int | None:
        """Where the next `Estimator.train` call stops: the next multiple of `every_n_steps`
        after `step`, capped at `max_steps` (None: train until the input ends or a hook stops)."""
        every = self.every_n_steps
        if not every:
            return self.max_steps
        next_eval = (step // every + 1) * every
        return next_eval if self.max_steps is None else min(next_eval, self.max_steps)

    def eval_due(self, step: int, *, stop_requested: bool) -> bool:
        """Whether to evaluate after a training segment that ended at `step`."""
        every = self.every_n_steps
        return bool(every and step % every == 0) or step == self.max_steps or stop_requested

    @staticmethod
    def final_eval_due(step: int, last_eval_step: int | None) -> bool:
        """Whether to evaluate once more when training ends at `step`."""
        return last_eval_step is None or last_eval_step != step


def check_finite(state, step: int, logs: dict, weights_finite: bool) -> None:
    """The NaN/Inf sentinel: raises `NonFiniteError` when the loop's loss or the weights (and
    optimizer state) are not finite, before any checkpoint of that state is written. The
    report and repro bundle are the job's `tpuestimator.debug.sentinel.NonFiniteReportHook`."""
    what = "loss" if not math.isfinite(logs["loss"]) else ("weights" if not weights_finite else None)
    if what is None:
        return
    latest = state.latest_checkpoint()
    loop_start = step - logs["steps"]
    raise NonFiniteError(
        f"Training stopped at global step {step}: the {what} became NaN or Inf during the loop of steps "
        f"{loop_start}..{step}. No checkpoint was written for it; the last finite checkpoint is "
        f"{latest or 'none (no checkpoint was saved yet)'}. Lower params.learning_rate, check the input "
        "data (input assertions: data.assertions), or rerun with debug.check_numerics: true to find the op.",
        step=step, what=what, last_good_checkpoint=latest, loop_start=loop_start, loss=logs["loss"])


class TrainController:
    """Runs device loops from the current global step to `target` for one `Estimator.train`."""

    def __init__(self, estimator, hooks, cadence: Cadence):
        self.estimator = estimator
        self.hooks = hooks
        self.cadence = cadence

    def run(self, target: int | None, *, save_final_checkpoint: bool = True) -> dict:
        """Trains until `target` (None: until the input ends or a hook stops); returns the last logs."""
        import tensorflow as tf

        est, hooks, cadence = self.estimator, self.hooks, self.cadence
        state, train_input = est.state, est.train_input
        sentinel = est.config.nan_sentinel
        read_loop = est.loop_reader()
        per_step = est.per_step_loop() if hooks.wants_per_step_values else None
        est.per_step_values = {}
        start = step = last_saved = state.step
        hooks.begin(start, {"max_steps": target, "model_dir": est.model_dir, "num_replicas": est.num_replicas,
                            "global_batch_size": est.config.train_batch_size})
        logs: dict = {}
        # The loop's metrics start from zero; `read_loop` resets them as it reads them after each loop.
        for metric in state.train_metrics.values():
            metric.reset_state()
        try:
            while target is None or step < target:
                n = cadence.loop_size(step, target, hooks)
                hooks.before_loop(step)
                loop = train_input.loop if per_step is None else per_step[0]  # a hook may swap the loop
                t0 = time.perf_counter()
                ran = int(loop(train_input.iterator, tf.constant(n, tf.int64)))
                elapsed = time.perf_counter() - t0
                step += ran
                if ran == 0:
                    break
                if per_step is not None:
                    est.per_step_values = {name: buf.numpy()[:ran] for name, buf in per_step[1].items()}
                results = {key: value.numpy() for key, value in read_loop().items()}
                logs = self._logs(results, ran, elapsed)
                if sentinel:
                    check_finite(state, step, logs, bool(results["__all_finite__"]))
                est.last_train_logs = logs
                hooks.after_loop(step, logs)
                fault_point("after_loop", step)
                if cadence.checkpoint_due(step, last_saved):
                    est.save_checkpoint()
                    last_saved = step
                    if not est.config.async_checkpoint:
                        fault_point("after_checkpoint", step)
                if ran < n or est.stop_training:  # the one stop flag (hooks set it)
                    break
            final_save = save_final_checkpoint and step != last_saved
            if final_save:
                est.save_checkpoint()
            est.sync_checkpoints()  # train() returns with its checkpoints on disk
            if final_save:
                fault_point("after_checkpoint", step)
        except BaseException as exc:
            hooks.on_exception(step, exc)
            raise
        hooks.end(step, logs)
        return logs

    def _logs(self, results: dict, ran: int, elapsed: float) -> dict:
        batch = self.estimator.config.train_batch_size
        return {"loss": float(results["loss"]), "steps": ran,
                "steps_per_sec": ran / elapsed if elapsed > 0 else float("inf"),
                "examples_per_sec": ran * batch / elapsed if elapsed > 0 else float("inf"),
                **{name: float(results[f"report/{name}"]) for name in self.estimator.state.report_names}}
