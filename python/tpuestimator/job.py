"""A whole job from a config: train, evaluate, export and record the run.

The CLI (`tpuestimator train`) and the R package (`tpu_train()`) both call `run_job`, so a
config gives the same result from either language.
"""
from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from tpuestimator import data
from tpuestimator.config import JobConfig, dump_config, load_config
from tpuestimator.debug import hooks_from_config, numerics
from tpuestimator.debug.sentinel import NonFiniteReportHook
from tpuestimator.errors import ConfigError
from tpuestimator.estimator import Estimator, RunConfig
from tpuestimator.hooks.builtin import LoggingHook, ProgressCallbackHook, SummaryHook
from tpuestimator.hooks.hparams import HParamsHook
from tpuestimator.logcapture import capture_log
from tpuestimator.modeldir import check_model_dir, default_model_dir
from tpuestimator.runs import RunRecorder
from tpuestimator.runs.hook import RecorderHook
from tpuestimator.serving import EXPORT_META, load_export, predict  # noqa: F401  (the R package calls job.predict)
from tpuestimator.spec import Mode
from tpuestimator.training import EarlyStopping, EvalSpec, TrainSpec, make_exporters, train_and_evaluate

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class JobResult:
    """What a job left behind."""

    run_dir: str | None
    model_dir: str
    export_dir: str | None
    metrics: dict | None
    history: list
    global_step: int
    config: dict
    exports: dict = dataclasses.field(default_factory=dict)
    stopped_early: bool = False

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _as_config(config, overrides: Iterable[str]) -> JobConfig:
    if isinstance(config, JobConfig):
        return config.replace() if not overrides else load_config(config.to_dict(), overrides)
    return load_config(config, overrides)


def model_params(cfg: JobConfig) -> dict:
    """The config's params plus what the data defines (num_classes, vocabulary, image)."""
    params = cfg.params
    section = cfg.section("data")
    vocab = data.vocabulary(section)
    if vocab and "vocabulary" not in params:
        params["vocabulary"] = list(vocab)
    if "num_classes" not in params:
        n = data.num_classes(section)
        if n:
            params["num_classes"] = int(n)
    if vocab and params.get("num_classes") and len(vocab) != params["num_classes"]:
        raise ConfigError("params.num_classes", params["num_classes"],
                          f"the vocabulary's size ({len(vocab)} classes in data.vocabulary)")
    return params


def build_estimator(cfg: JobConfig, *, model_dir: str | None = None, model_fn=None):
    """An Estimator for a config (the model function from `model` unless given)."""
    return Estimator(model_fn or cfg.model, RunConfig.from_job(cfg, model_dir=model_dir), model_params(cfg))


def input_fn_for(cfg: JobConfig, mode: str, pattern: str | None = None):
    """The input function of a config's `data` section for `mode` (`pattern` replaces the files)."""
    section = cfg.section("data")
    if pattern is not None:
        section["eval" if mode != "train" else "train"] = pattern
    key = "train" if mode == "train" else "eval"
    if not section.get(key) and "manifest" not in section:
        raise ConfigError(f"data.{key}", None, f"a TFRecord file pattern to {'train' if key == 'train' else 'evaluate'} on")
    return data.make_input_fn(section, mode)


def _planned_evals(cfg: JobConfig) -> int | None:
    max_steps = cfg.raw["train"]["max_steps"]
    every = cfg.raw["eval"]["every_n_steps"]
    if not max_steps:
        return None
    if not cfg.raw["data"].get("eval") and "manifest" not in cfg.raw["data"]:
        return max(1, -(-max_steps // cfg.raw["train"]["iterations_per_loop"]))
    return -(-max_steps // every) if every else 1


def _model_summary(model) -> str:
    lines: list[str] = []
    try:
        model.summary(print_fn=lambda line, *a, **k: lines.append(line), line_length=100)
    except TypeError:
        return repr(model)
    return "\n".join(lines)


def _flags(cfg: JobConfig) -> dict:
    flags = {"model": cfg.model, **cfg.params}
    for section in ("train", "eval"):
        for key in ("batch_size", "max_steps", "steps", "iterations_per_loop"):
            if cfg.raw[section].get(key) is not None:
                flags[f"{section}.{key}"] = cfg.raw[section][key]
    flags["run.precision"] = cfg.raw["run"]["precision"]
    # Other overridden fields join the flags with their typed, resolved value; params are
    # already there under their own names.
    for item in cfg.overrides:
        key = item.partition("=")[0].strip()
        if key.startswith("params.") or key in flags:
            continue
        node = cfg.raw
        for part in key.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        if node is not None and not isinstance(node, (dict, list)):
            flags[key] = node
    return flags


def run_job(config: str | Mapping[str, Any] | JobConfig, *, overrides: Iterable[str] = (),
            model_dir: str | None = None, runs_dir: str | None = None, run_dir: str | None = None,
            record: bool = True, model_fn: Callable | None = None, hooks: Iterable[Any] = (),
            progress: Callable[[str, dict], Any] | None = None, export: bool = True,
            resume: bool = False) -> JobResult:
    """Trains, evaluates, exports and records one job.

    Args:
      config: a YAML/JSON path, a dict, or a `JobConfig`.
      overrides: ``key.sub=value`` strings (`--set`).
      model_dir: checkpoint folder; default `run.model_dir`, else ``models/<name>`` (inside
        tfruns's run, `run_dir`: ``<runs>/.models/<run>``). A rerun with the same settings
        resumes from its latest checkpoint; other settings fail (`tpuestimator.modeldir`).
      runs_dir: where the run record goes; default `run.runs_dir` (``runs``).
      run_dir: an existing run folder to record into (tfruns's active run, from R).
      record: False to skip the run record.
      model_fn: a model function overriding `model` (e.g. an R function).
      hooks: extra hooks (Hook objects or callables `fn(event, info)`).
      progress: `progress(event, info)` called at begin/loop/eval/end.
      export: False to skip the exporters.
      resume: continue from the model dir's checkpoint even if it was trained with other
        settings (see `tpuestimator.modeldir.check_model_dir`).

    Returns:
      A `JobResult`.
    """

    cfg = _as_config(config, overrides)
    model_dir = model_dir or default_model_dir(cfg.raw, run_dir) or cfg.model_dir
    raw = cfg.raw
    resumed_from_step = check_model_dir(cfg.to_dict(), model_dir, resume=resume)
    os.makedirs(model_dir, exist_ok=True)
    dump_config(cfg, os.path.join(model_dir, "config.yaml"))
    recorder = None
    if record:
        common = dict(config=cfg.to_dict(), flags=_flags(cfg), script=cfg.source,
                      planned_evals=_planned_evals(cfg), properties={"model_dir": os.path.abspath(model_dir),
                                                                     "resumed_from_step": resumed_from_step})
        if run_dir:
            recorder = RunRecorder.attach(run_dir, **common)
        else:
            recorder = RunRecorder.create(runs_dir or raw["run"]["runs_dir"] or "runs", **common)
    log_path = recorder.run_dir / "output.log" if recorder else None
    with capture_log(log_path):
        try:
            result = _train(cfg, model_dir, recorder, model_fn, hooks, progress, export)
        except BaseException as exc:
            if recorder is not None:
                _record_nonfinite_report(recorder, exc)
                recorder.fail(exc)
            raise
    if recorder is not None:
        recorder.complete()
    return result


def _record_nonfinite_report(recorder, exc: BaseException) -> None:
    """Copies the NaN/Inf sentinel's report (not its bundle) into a failed run's record."""
    report = getattr(exc, "report_path", None)
    if not report or not os.path.isdir(report):
        return
    try:
        for name in ("report.txt", "report.json"):
            if os.path.exists(os.path.join(report, name)):
                recorder.add_artifact(os.path.join(report, name), f"nonfinite/{name}")
        recorder.set_properties(nonfinite_report=os.path.abspath(report))
    except Exception:  # noqa: BLE001 - recording the failure itself must still happen
        logger.exception("could not copy the NaN/Inf report into the run record")


def _job_hooks(cfg: JobConfig, estimator, recorder, progress, hooks, *, has_eval: bool) -> list:
    """The hooks a job registers, in order: the NaN/Inf report first (it completes the error
    message other hooks see), logging, the run record, debug hooks, progress, the user's."""
    raw = cfg.raw
    model_dir = estimator.model_dir
    job_hooks: list = [NonFiniteReportHook(job_config=cfg.to_dict()), LoggingHook(raw["run"]["log_every_n_loops"])]
    if recorder is not None:
        job_hooks.append(SummaryHook(str(recorder.logs_dir)))
        job_hooks.append(HParamsHook(str(recorder.logs_dir), _flags(cfg), trial_id=recorder.name))
        # metric rows (the loop's training metrics beside each evaluation, written before the
        # exporters and the caller's hooks run) and `end` heartbeats
        job_hooks.append(RecorderHook(recorder, has_eval=has_eval))
    job_hooks.extend(hooks_from_config(raw["debug"], logdir=str(recorder.logs_dir) if recorder else None,
                                       model_dir=model_dir))
    if progress is not None:
        job_hooks.append(ProgressCallbackHook(progress, raw["train"]["max_steps"]))
    job_hooks.extend(hooks)
    return job_hooks


def _train(cfg, model_dir, recorder, model_fn, hooks, progress, export) -> JobResult:
    raw = cfg.raw
    section = cfg.section("data")
    estimator = build_estimator(cfg, model_dir=model_dir, model_fn=model_fn)
    train_fn = input_fn_for(cfg, "train")
    has_eval = bool(section.get("eval")) or "manifest" in section
    eval_fn = input_fn_for(cfg, "eval") if has_eval else None
    job_hooks = _job_hooks(cfg, estimator, recorder, progress, hooks, has_eval=eval_fn is not None)
    exp = raw["export"]
    export_base = exp["dir"] or os.path.join(model_dir, "export")
    exporters = make_exporters(exp["exporters"], export_base, keep=exp["keep"], best_metric=exp["best_metric"],
                               best_mode=exp["best_mode"]) if export and exp["enabled"] else []
    es = raw["eval"]["early_stopping"]
    eval_spec = EvalSpec(input_fn=eval_fn, steps=raw["eval"]["steps"], every_n_steps=raw["eval"]["every_n_steps"],
                         exporters=exporters, early_stopping=EarlyStopping(**es) if es else None) if eval_fn else None
    max_steps = raw["train"]["max_steps"]
    if raw["train"]["steps"] is not None:
        max_steps = estimator.global_step + raw["train"]["steps"]

    with data.translate_errors(section, "train"), numerics.check_numerics(raw["debug"]["check_numerics"]), \
            numerics.translate_errors(estimator):
        outcome = train_and_evaluate(estimator, TrainSpec(input_fn=train_fn, max_steps=max_steps, hooks=job_hooks),
                                     eval_spec)
    for hook in job_hooks:
        close = getattr(hook, "close", None)  # a user's hook may be a plain callable
        if callable(close):
            close()
    exports = dict(outcome.exports)
    if export and exp["enabled"] and not exporters:
        exports["final"] = estimator.export_saved_model(os.path.join(export_base, "final"),
                                                        version=outcome.global_step)
    for path in exports.values():
        write_export_metadata(path, cfg, estimator)
    export_dir = exports.get("final") or exports.get("best") or exports.get("latest")
    if recorder is not None:
        spec = estimator.spec
        opt = getattr(spec.optimizer, "inner_optimizer", spec.optimizer)
        recorder.set_properties(
            model=_model_summary(spec.model), optimizer=type(opt).__name__,
            loss_function=getattr(spec.loss, "name", None) or type(spec.loss).__name__,
            global_step=outcome.global_step, stopped_early=str(outcome.stopped_early).upper(),
            **estimator.device_info.as_properties(),
            **({"export_dir": os.path.abspath(export_dir)} if export_dir else {}),
            **({"corrupt_records_skipped": data.corrupt_records_skipped()} if section.get("on_corrupt") == "skip" else {}))
        samples = data.num_examples(section, "train") if hasattr(data, "num_examples") else None
        if samples:
            recorder.set_properties(samples=samples)
        if outcome.metrics:
            recorder.write_evaluation({k: v for k, v in outcome.metrics.items() if k != "num_examples"})
        if export_dir:
            recorder.add_artifact(export_dir, "export")
    return JobResult(run_dir=str(recorder.run_dir) if recorder else None, model_dir=model_dir, export_dir=export_dir,
                     metrics=outcome.metrics, history=outcome.history, global_step=outcome.global_step,
                     config=cfg.to_dict(), exports=exports, stopped_early=outcome.stopped_early)


def write_export_metadata(export_dir: str, cfg: JobConfig, estimator) -> None:
    """Writes `assets.extra/tpuestimator.json` (data section, classes, features) into an export,
    so `tpuestimator predict EXPORT FILE...` can read raw files the way training did."""
    from tpuestimator.io import atomic_write_json

    meta = {"data": cfg.section("data"), "class_names": list(estimator.spec.class_names or []),
            "feature_spec": {k: [list(s), d] for k, (s, d) in estimator.feature_spec.items()},
            "model": cfg.model, "global_step": estimator.global_step}
    atomic_write_json(os.path.join(export_dir, "assets.extra", EXPORT_META), meta)


def resolve_model_dir(path: str) -> str:
    """A model dir, or a run folder whose `model_dir` property points to one."""
    prop = Path(path) / "tfruns.d" / "properties" / "model_dir"
    if prop.is_file():
        return prop.read_text().strip()
    if not (Path(path) / "config.yaml").is_file():
        raise ConfigError("MODEL_DIR", path, "a model dir written by `tpuestimator train` (it holds config.yaml) "
                          "or a run folder")
    return path


def load_job_config(model_dir: str, overrides: Iterable[str] = ()) -> JobConfig:
    return load_config(os.path.join(model_dir, "config.yaml"), overrides)


def evaluate_job(model_dir: str, *, overrides: Iterable[str] = (), data_pattern: str | None = None) -> dict:
    """Evaluates the latest checkpoint of a trained model dir (or run folder)."""
    model_dir = resolve_model_dir(model_dir)
    cfg = load_job_config(model_dir, overrides)
    estimator = build_estimator(cfg, model_dir=model_dir)
    if estimator.latest_checkpoint() is None:
        raise ConfigError("MODEL_DIR", model_dir, "a model dir holding a checkpoint (train first)")
    with data.translate_errors(cfg.section("data"), "eval"):
        return estimator.evaluate(input_fn_for(cfg, "eval", data_pattern))


def export_job(model_dir: str, out: str | None = None, *, format: str = "saved_model",
               overrides: Iterable[str] = ()) -> str:
    """Exports the latest checkpoint of a model dir as a SavedModel (or a .tflite file)."""
    if format not in ("saved_model", "tflite"):
        raise ConfigError("format", format, "'saved_model' or 'tflite'")
    model_dir = resolve_model_dir(model_dir)
    cfg = load_job_config(model_dir, overrides)
    estimator = build_estimator(cfg, model_dir=model_dir)
    if estimator.latest_checkpoint() is None:
        raise ConfigError("MODEL_DIR", model_dir, "a model dir holding a checkpoint (train first)")
    # Building the model needs the feature spec: one probe of the eval (or train) input.
    mode = "eval" if cfg.raw["data"].get("eval") else "train"
    estimator.build(input_fn_for(cfg, mode), Mode.EVAL if mode == "eval" else Mode.TRAIN)
    base = out or os.path.join(model_dir, "export", "manual")
    path = estimator.export_saved_model(base, version=estimator.global_step)
    write_export_metadata(path, cfg, estimator)
    if format == "tflite":
        import tensorflow as tf

        from tpuestimator.io import atomic_write_bytes

        converter = tf.lite.TFLiteConverter.from_saved_model(path)
        target = os.path.join(base, f"model-{estimator.global_step}.tflite")
        atomic_write_bytes(target, converter.convert())
        return target
    return path


