"""The outer training loop, in the style of Orbit's `Controller`.

`Estimator.train` checks its arguments, builds the model and hands the rest to a
`TrainController`: loops of `iterations_per_loop` device steps, with the cadence of
everything the host does between them declared in one `Cadence` (loop size, boundaries hooks
ask for, checkpoints) and the per-loop actions in a fixed order (`TrainController.train_to`):

    before_loop hooks -> device loop -> read metrics -> NaN/Inf sentinel -> after_loop hooks
    -> checkpoint when due -> stop when asked or when the input ended

Evaluation and export cadence is one level up, in `tpuestimator.core.training.train_and_evaluate`,
which runs one controller for the whole call (`session`, then `train_to` per segment), and
declared here too: `EvalCadence` (the training segments' ends, when an evaluation is due).
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import math

from tpuestimator.core import checkpointing, workarounds
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


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainResult:
    """Where a `TrainController` stands after `train_to` (and at its end).

    Attributes:
      step: the global step it reached.
      logs: the last loop's logs ({} when no loop ran).
      stop_requested: a hook asked to stop (`Hook.stop_training`).
    """

    step: int
    logs: dict
    stop_requested: bool


class TrainController:
    """Runs device loops for one `Estimator.train` or one `train_and_evaluate` call.

    Args:
      trainer: the `tpuestimator.core.trainer.Trainer` (input and device loops), with its
        input set (`Trainer.use_input`).
      state: the built `TrainingState` (global step, metrics' names, checkpoints).
      hooks: a `HookList`.
      config: the `RunConfig` (its `Cadence`, `nan_sentinel`, `async_checkpoint`,
        `train_batch_size`).
      info: what `Hook.begin` receives besides `max_steps` (model_dir, num_replicas, ...).

    One controller brackets the hooks once: `with controller.session(max_steps):` calls
    `begin`, then `end` (or `on_exception` when something inside raises); inside it,
    `train_to(target)` runs loops up to `target` (once for `train`; once per segment under
    `train_and_evaluate`, which evaluates between them).

    The controller writes only its own fields and talks to nobody above it: checkpoints go
    through `tpuestimator.core.checkpointing` with the state it was given, what the loops
    produced comes back from the trainer as `LoopOutput`s, what the hooks want as their
    declared flags.
    """

    def __init__(self, *, trainer, state, hooks, config, info: dict):
        self.trainer = trainer
        self.state = state
        self.hooks = hooks
        self.cadence = Cadence.from_config(config)
        self.nan_sentinel = bool(config.nan_sentinel)
        self.async_checkpoint = bool(config.async_checkpoint)
        self.global_batch_size = int(config.train_batch_size)
        self.info = info
        self.step = state.step
        self.logs: dict = {}  # the last loop's, across `train_to` calls

    @property
    def result(self) -> TrainResult:
        return TrainResult(step=self.step, logs=self.logs, stop_requested=self.hooks.stop_training)

    @contextlib.contextmanager
    def session(self, max_steps: int | None):
        """`begin` now; `end` when the block ends, `on_exception` (and the error) when it raises.
        Any error out of it (a hook's included) drops the trainer's input first."""
        hooks = self.hooks
        try:
            hooks.begin(self.step, {"max_steps": max_steps, **self.info})
            try:
                yield self
            except BaseException as exc:
                hooks.on_exception(self.step, exc)
                raise
            hooks.end(self.step, self.logs)
        except BaseException as exc:
            # the hooks (the NaN/Inf report's replay) have read the input: the error may outlive
            # this training for long (a notebook's last error), its iterator must not
            self.trainer.release_input()
            workarounds.drop_tensorflow_frame_locals(exc)
            raise

    def train_to(self, target: int | None, *, save_final_checkpoint: bool = True) -> TrainResult:
        """Device loops from the current global step to `target` (None: until the input ends or
        a hook stops), stopping early when the input
        ends or a hook asks; a checkpoint at the end (unless `save_final_checkpoint` is False
        or one was just written), on disk when this returns."""
        trainer, hooks, cadence, state = self.trainer, self.hooks, self.cadence, self.state
        per_step = hooks.wants_per_step_values
        step = last_saved = self.step = state.step
        trainer.reset_metrics()
        while target is None or step < target:
            n = cadence.loop_size(step, target, hooks)
            hooks.before_loop(step)
            out = trainer.run_loop(n, per_step=per_step, finiteness=self.nan_sentinel)
            step += out.steps
            self.step = step
            if out.steps == 0:
                break
            self.logs = logs = self._logs(out)
            if self.nan_sentinel:
                check_finite(state, step, logs, bool(out.results["__all_finite__"]))
            hooks.after_loop(step, logs)
            fault_point("after_loop", step)
            if cadence.checkpoint_due(step, last_saved):
                checkpointing.save(state, asynchronous=self.async_checkpoint)
                last_saved = step
                if not self.async_checkpoint:
                    fault_point("after_checkpoint", step)
            if out.steps < n or hooks.stop_training:  # the input ended, or a hook asked to stop
                break
        final_save = save_final_checkpoint and step != last_saved
        if final_save:
            checkpointing.save(state, asynchronous=self.async_checkpoint)
        checkpointing.sync(state, asynchronous=self.async_checkpoint)  # returns with its checkpoints on disk
        if final_save:
            fault_point("after_checkpoint", step)
        return self.result

    def _logs(self, out) -> dict:
        results, ran, elapsed = out.results, out.steps, out.elapsed
        return {"loss": float(results["loss"]), "steps": ran,
                "steps_per_sec": ran / elapsed if elapsed > 0 else float("inf"),
                "examples_per_sec": ran * self.global_batch_size / elapsed if elapsed > 0 else float("inf"),
                **{name: float(results[f"report/{name}"]) for name in self.state.report_names}}
