"""`train_and_evaluate`: evaluate every N steps, early stopping, final/latest/best exporters.

TPUEstimator users asked for evaluation every N steps rather than every `throttle_secs`,
for early stopping, and for a best-model export that stays right across restarts. All of
it is host work at loop boundaries: the device loop never waits for it.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tpuestimator.config_views import EarlyStopping  # defined beside the config: `eval.early_stopping` is one
from tpuestimator.core.best_weights import keep_best_weights, restore_best_weights
from tpuestimator.core.controller import EvalCadence
from tpuestimator.core.hooks import HookList
from tpuestimator.core.signatures import copy_saved_model
from tpuestimator.core.stopping import EarlyStoppingHook, improved, read_state
from tpuestimator.errors import ConfigError
from tpuestimator.spec import Mode
from tpuestimator.system.faults import fault_point
from tpuestimator.system.io import atomic_write_json

logger = logging.getLogger(__name__)

# In the model dir: the step of the last evaluation whose exports completed (a resumed job
# completes an evaluation a kill skipped, `due_evaluation_missing`).
EVAL_STATE_FILE = "last_evaluation.json"


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainSpec:
    input_fn: Callable
    max_steps: int | None = None
    hooks: Sequence[Any] = ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvalSpec:
    """When and how to evaluate inside `train_and_evaluate`.

    Attributes:
      every_n_steps: evaluate when the global step crosses a multiple of this (None: only
        at the end).
      steps: batches per evaluation; None evaluates every example exactly once.
      exporters: `Exporter`s run after each evaluation (and at the end).
      early_stopping: an `EarlyStopping`, or None.
    """

    input_fn: Callable
    steps: int | None = None
    every_n_steps: int | None = None
    exporters: Sequence[Exporter] = ()
    early_stopping: EarlyStopping | None = None
    hooks: Sequence[Any] = ()
    name: str = "eval"


class Exporter:
    """Base exporter: writes SavedModels under `<base>/<name>/<global step>/`, keeps `keep`.

    `serving_inputs` (name -> `serving.ServingInput`) adds signatures to each export
    (`Estimator.export_saved_model`); jobs pass the data section's (tf.Example, image bytes).
    `assets_extra(estimator)` -> {file name: JSON value} is written into each export's
    `assets.extra/` before it appears (jobs: its metadata, `serving.export_metadata`).
    """

    name = "exporter"

    def __init__(self, base_dir: str, *, keep: int = 5, serving_inputs: Mapping[str, Any] | None = None,
                 assets_extra: Callable[[Any], Mapping[str, Any]] | None = None):
        self.base_dir = base_dir
        self.keep = keep
        self.serving_inputs = serving_inputs
        self.assets_extra = assets_extra

    @property
    def dir(self) -> str:
        return os.path.join(self.base_dir, self.name)

    def _export(self, estimator, step: int, written: dict | None = None) -> str | None:
        """`written` (`train_and_evaluate`'s): step -> [(export, serving inputs)] of the exports
        this training wrote. One of this step (so of these weights, which the end's restored
        best weights are too) with the same serving inputs, still there (another exporter's
        `keep` may have removed it), is copied, not written again; what this call writes is
        added. An export found already at the target (a rerun's, or another training's in a
        shared `export.dir`) is kept and not added: its weights are not known to be these."""
        target = os.path.join(self.dir, str(step))
        if os.path.exists(target):  # a rerun at the same step: the export is already there
            return target
        assets_extra = self.assets_extra(estimator) if self.assets_extra else None
        same = [path for path, inputs in (written or {}).get(step, ())
                if inputs == self.serving_inputs and os.path.isdir(path)]
        if same:
            path = copy_saved_model(same[0], self.dir, version=step, model_dir=estimator.model_dir,
                                    step=step, assets_extra=assets_extra)
        else:
            path = estimator.export_saved_model(self.dir, version=step, serving_inputs=self.serving_inputs,
                                                assets_extra=assets_extra)
        if written is not None:
            written.setdefault(step, []).append((path, self.serving_inputs))
        self._garbage_collect()
        return path

    def _garbage_collect(self) -> None:
        versions = sorted(int(d) for d in os.listdir(self.dir) if d.isdigit())
        for old in versions[:-self.keep]:
            shutil.rmtree(os.path.join(self.dir, str(old)), ignore_errors=True)

    def after_eval(self, estimator, step: int, metrics: dict, written: dict | None = None) -> str | None:
        return None

    def at_end(self, estimator, step: int, metrics: dict | None, written: dict | None = None) -> str | None:
        return None


class FinalExporter(Exporter):
    """Exports once, when training ends."""

    name = "final"

    def at_end(self, estimator, step, metrics, written=None):
        return self._export(estimator, step, written)


class LatestExporter(Exporter):
    """Exports after every evaluation, keeping the newest `keep`."""

    name = "latest"

    def after_eval(self, estimator, step, metrics, written=None):
        return self._export(estimator, step, written)


class BestExporter(Exporter):
    """Exports when `metric` improves; the best value is kept in `best_state.json` beside the
    exports (written atomically), so a restarted job compares against the true best."""

    name = "best"

    def __init__(self, base_dir: str, *, metric: str = "loss", mode: str | None = None, keep: int = 5,
                 serving_inputs: Mapping[str, Any] | None = None,
                 assets_extra: Callable[[Any], Mapping[str, Any]] | None = None):
        super().__init__(base_dir, keep=keep, serving_inputs=serving_inputs, assets_extra=assets_extra)
        self.metric = metric
        self.mode = mode or ("min" if "loss" in metric or "error" in metric else "max")

    @property
    def state_path(self) -> str:
        return os.path.join(self.dir, "best_state.json")

    def after_eval(self, estimator, step, metrics, written=None):
        if self.metric not in metrics:
            raise ConfigError("export.best_metric", self.metric,
                              "one of the evaluation's metrics: " + ", ".join(sorted(metrics)))
        state = read_state(self.state_path)
        value = metrics[self.metric]
        if not improved(value, state.get("value"), self.mode):
            return None
        path = self._export(estimator, step, written)
        atomic_write_json(self.state_path, {"metric": self.metric, "mode": self.mode, "value": value,
                                            "step": step, "export": path})
        return path

    def best(self) -> dict:
        return read_state(self.state_path)


def make_exporters(names: Iterable[str], base_dir: str, *, keep: int = 5, best_metric: str = "loss",
                   best_mode: str | None = None, serving_inputs: Mapping[str, Any] | None = None,
                   assets_extra: Callable[[Any], Mapping[str, Any]] | None = None) -> list[Exporter]:
    out: list[Exporter] = []
    common = dict(keep=keep, serving_inputs=serving_inputs, assets_extra=assets_extra)
    for name in names:
        if name == "final":
            out.append(FinalExporter(base_dir, **common))
        elif name == "latest":
            out.append(LatestExporter(base_dir, **common))
        elif name == "best":
            out.append(BestExporter(base_dir, metric=best_metric, mode=best_mode, **common))
        else:
            raise ValueError(f"Unknown exporter {name!r}: expected 'final', 'latest' or 'best'.")
    return out


@dataclasses.dataclass
class TrainEvalResult:
    """`global_step`: the step trained to (the latest checkpoint's); `best_step`: with early
    stopping, the step of the best evaluation; `restored_step`: with `restore_best`, the step
    whose weights were restored at the end (the final metrics and exports are that step's),
    None when the last weights were the best."""

    metrics: dict | None
    history: list
    exports: dict
    stopped_early: bool
    global_step: int
    best_step: int | None = None
    restored_step: int | None = None


def last_evaluated_step(model_dir: str) -> int | None:
    """The global step of the last completed evaluation (with its exports) in `model_dir`."""
    state = read_state(os.path.join(model_dir, EVAL_STATE_FILE))
    step = state.get("step")
    return int(step) if isinstance(step, int) else None


def due_evaluation_missing(model_dir: str, step: int, cadence: EvalCadence) -> bool:
    """Whether a job resuming at `step` owes that step's evaluation: it is an evaluation step
    before `max_steps` (the final evaluation happens anyway) that no evaluation completed."""
    if step <= 0 or (cadence.max_steps is not None and step >= cadence.max_steps):
        return False
    return cadence.eval_due(step, stop_requested=False) and last_evaluated_step(model_dir) != step


def train_and_evaluate(estimator, train_spec: TrainSpec, eval_spec: EvalSpec | None) -> TrainEvalResult:
    """Trains to `train_spec.max_steps`, evaluating every `eval_spec.every_n_steps` steps.

    A restarted job resumes from the latest checkpoint; exporters and early stopping keep
    their state on disk. Returns the final metrics, the evaluation history and the exports.
    One `TrainController` runs the whole call: the train hooks see `begin` once, before the
    first loop, and `end` once, after the final evaluation and exports; each evaluation
    reaches them as `before_eval` (training paused, its checkpoint on disk) and `after_eval`
    (recording, progress, early stopping hooks), each export as `after_export`.
    """
    history: list[dict] = []
    exports: dict[str, str] = {}
    stopped_early = False
    stopper = None
    step = estimator.global_step
    max_steps = train_spec.max_steps
    cadence = EvalCadence(eval_spec.every_n_steps if eval_spec else None, max_steps)
    metrics = None
    rule = eval_spec.early_stopping if eval_spec else None
    if rule:
        stopper = EarlyStoppingHook(rule.metric, mode=rule.mode, patience=rule.patience, min_delta=rule.min_delta,
                                    state_path=os.path.join(estimator.model_dir, "early_stopping.json"),
                                    field="eval.early_stopping.metric")
    # Wrapped once, so plain callables get after_eval/after_export too and keep their state.
    hooks = HookList(train_spec.hooks)
    # The exports this call writes, by step: another exporter of the same step copies one
    # (`Exporter._export`).
    written: dict[int, list] = {}

    def evaluate(at_step: int) -> dict:
        hooks.before_eval(at_step)
        result = estimator.evaluate(eval_spec.input_fn, steps=eval_spec.steps, hooks=eval_spec.hooks)
        history.append({"step": at_step, **result})
        hooks.after_eval(at_step, result)
        fault_point("after_eval", at_step)
        for exporter in eval_spec.exporters:
            path = exporter.after_eval(estimator, at_step, result, written)
            if path:
                exports[exporter.name] = path
                hooks.after_export(at_step, path)
        # Written once the evaluation AND its exports are done: a run killed in between redoes both.
        atomic_write_json(os.path.join(estimator.model_dir, EVAL_STATE_FILE), {"step": at_step, "metrics": result})
        return result

    def should_stop(at_step: int, result: dict) -> bool:
        stop = stopper.update(at_step, result)
        if rule.restore_best and stopper.best_step == at_step:
            keep_best_weights(estimator, at_step)
        return stop

    if eval_spec and due_evaluation_missing(estimator.model_dir, step, cadence):
        # The previous run saved this checkpoint and was killed before its evaluation (and its
        # best export): without this, that evaluation would be skipped for good.
        logger.warning("the checkpoint at step %d has no evaluation (the run that saved it stopped before it): "
                       "evaluating it before training on", step)
        metrics = evaluate(step)
        if stopper and should_stop(step, metrics):
            stopped_early = True
            max_steps = step  # trains no further; the end (final exports) runs as usual

    controller, session = None, contextlib.nullcontext()
    if max_steps is None or step < max_steps:
        estimator.build(train_spec.input_fn, Mode.TRAIN)
        hooks = estimator.hook_list(hooks)
        if not hooks.stop_training:  # else a hook asked to stop before training (after an evaluation)
            controller = estimator.train_controller(train_spec.input_fn, hooks)
            session = controller.session(max_steps)
    restored_step = None
    with session:
        while controller is not None and (max_steps is None or step < max_steps) and not hooks.stop_training:
            target = cadence.segment_end(step)
            before = step
            result = controller.train_to(target)
            step = result.step
            if step == before:  # the input ended
                break
            if eval_spec and cadence.eval_due(step, stop_requested=result.stop_requested):
                metrics = evaluate(step)
                if stopper and should_stop(step, metrics):
                    stopped_early = True
                    break
            if result.stop_requested:  # a hook (early stopping, stop-at-step, an R callback) asked to stop
                stopped_early = True
                break
            if target is not None and step < target:  # the input ended inside the loop
                break
        if eval_spec and cadence.final_eval_due(step, None if metrics is None else metrics.get("global_step")):
            metrics = evaluate(step)
            if stopper and rule.restore_best:
                should_stop(step, metrics)  # the last evaluation may be the best: its weights are then kept
        best_step = stopper.best_step if stopper else None
        if (rule and rule.restore_best and best_step is not None and best_step != step
                and restore_best_weights(estimator, best_step)):
            # The final evaluation, the exports and the run's metrics are the best evaluation's model.
            restored_step = best_step
            metrics = estimator.evaluate(eval_spec.input_fn, steps=eval_spec.steps, hooks=eval_spec.hooks)
            logger.info("%s at step %d; the best evaluation was step %d (%s %s): its weights are restored, "
                        "evaluated and exported", "stopped early" if stopped_early else "trained to the end", step,
                        best_step, rule.metric, metrics.get(rule.metric))
        export_step = step if restored_step is None else restored_step
        for exporter in (eval_spec.exporters if eval_spec else ()):
            path = exporter.at_end(estimator, export_step, metrics, written)
            if path:
                exports[exporter.name] = path
    best = [e for e in (eval_spec.exporters if eval_spec else ()) if isinstance(e, BestExporter)]
    if best and best[0].best().get("export"):
        exports["best"] = best[0].best()["export"]
    return TrainEvalResult(metrics=metrics, history=history, exports=exports, stopped_early=stopped_early,
                           global_step=step, best_step=best_step, restored_step=restored_step)
