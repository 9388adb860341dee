"""A whole job from a config: train, evaluate, export and record the run.

The CLI (`tpuestimator train`) and the R package (`tpu_train()`) both call `run_job`, so a
config gives the same result from either language. Composition only: the config -> Estimator
builders are in from_config.py, the run record's flags, planned evaluations, model summary and
NaN/Inf report in runs/job_record.py, the export metadata in serving.py, the jobs on a trained
model dir (`evaluate_job`, `export_job`) in model_dir_jobs.py.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import yaml

from tpuestimator import data
from tpuestimator.config import JobConfig, dump_config, load_config
from tpuestimator.core import checkpointing
from tpuestimator.core.checkpointing import CheckpointMismatchError
from tpuestimator.core.cluster_task import remove_scratch, scratch_dir, task_role
from tpuestimator.core.devices import sync_workers
from tpuestimator.core.hooks import HookList
from tpuestimator.core.training import EvalSpec, TrainSpec, make_exporters, train_and_evaluate
from tpuestimator.debug import hooks_from_config, numerics
from tpuestimator.debug.sentinel import NonFiniteReportHook
from tpuestimator.errors import DiskFullError
from tpuestimator.hooks.builtin import LoggingHook, ProgressCallbackHook, SummaryHook
from tpuestimator.hooks.hparams import HParamsHook
from tpuestimator.jobs.from_config import build_estimator, input_fn_for
from tpuestimator.jobs.interrupts import StopOnSignal, TrainingInterrupted
from tpuestimator.jobs.leftovers import remove_stale_temporaries
from tpuestimator.jobs.logcapture import capture_log
from tpuestimator.jobs.model_dir_jobs import write_warmup
from tpuestimator.jobs.model_dir_lock import model_dir_lock
from tpuestimator.jobs.modeldir import CONFIG_FILE, check_model_dir, default_model_dir, unappliable_settings_error
from tpuestimator.jobs.preflight import check_job
from tpuestimator.models.params import DataParams
from tpuestimator.runs import RunRecorder
from tpuestimator.runs.hook import RecorderHook
from tpuestimator.runs.job_record import add_nonfinite_report, job_flags, model_summary, planned_rows
from tpuestimator.serving.exports import (
    EXPORT_META,
    data_serving_inputs,
    export_metadata,
    is_export_dir,
    write_export_metadata,
)
from tpuestimator.system.diskspace import disk_full_error, is_disk_full, translate_disk_full
from tpuestimator.system.io import atomic_write_text

logger = logging.getLogger(__name__)

__all__ = ["JobResult", "run_job"]


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
    # With `eval.early_stopping`: the step of the best evaluation (with `restore_best`, the
    # step whose weights `metrics` and the exports are); None without early stopping.
    best_step: int | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _as_config(config, overrides: Iterable[str]) -> JobConfig:
    """A `JobConfig` is already validated: it is used as it is (validated once, typed to the end),
    with views of its own, so what a job resolves from it (its data section, read from the
    manifest) is this job's, never an earlier job's of the same config. With overrides it is a real
    change of fields, given as `--set` strings, validated again (`JobConfig.with_overrides`: its
    source, the run record's `script`, kept)."""
    if isinstance(config, JobConfig):
        overrides = tuple(overrides)
        return config.with_overrides(overrides) if overrides else dataclasses.replace(config)
    return load_config(config, overrides)


def run_job(config: str | Mapping[str, Any] | JobConfig, *, overrides: Iterable[str] = (),
            model_dir: str | None = None, runs_dir: str | None = None, run_dir: str | None = None,
            record: bool = True, model_fn: Callable | None = None, hooks: Iterable[Any] = (),
            progress: Callable[[str, dict], Any] | None = None, export: bool = True,
            resume: bool = False, handle_signals: bool = False, scan_data: bool = True) -> JobResult:
    """Trains, evaluates, exports and records one job.

    Args:
      config: a YAML/JSON path, a dict, or a `JobConfig`.
      overrides: ``key.sub=value`` strings (`--set`).
      model_dir: checkpoint folder; default `run.model_dir`, else ``models/<name>`` (inside
        tfruns's run, `run_dir`: ``<runs>/.models/<run>``). A rerun with the same settings
        resumes from its latest checkpoint; other settings fail (`tpuestimator.jobs.modeldir`).
      runs_dir: where the run record goes; default `run.runs_dir` (``runs``).
      run_dir: an existing run folder to record into (tfruns's active run, from R).
      record: False to skip the run record.
      model_fn: a model function overriding `model` (e.g. an R function).
      hooks: extra hooks (Hook objects or callables `fn(event, info)`).
      progress: `progress(event, info)` called at begin/loop/eval/end.
      export: False to skip the exporters.
      resume: continue from the model dir's checkpoint even if it was trained with other
        settings (see `tpuestimator.jobs.modeldir.check_model_dir`).
      handle_signals: install SIGTERM/SIGINT handlers for the job (main thread only): the
        first signal finishes the loop, saves a checkpoint and raises `TrainingInterrupted`
        (`tpuestimator.jobs.interrupts`). The CLI sets it; library callers and R keep their own
        handlers by default.
      scan_data: False skips the preflight's read of the data files (their framing, first
        records and labels) unless the config has `data.assertions`; the batch-size checks
        still run. For data the caller has just written from checked values, as
        `tpuestimator.tables.train_table` does: a damaged file is then found only when the
        input pipeline reaches it.

    Returns:
      A `JobResult`.

    Raises:
      ModelDirLockedError: another job trains (or evaluates) in `model_dir`
        (`tpuestimator.jobs.model_dir_lock`).
      TrainingInterrupted: stopped by SIGTERM/SIGINT; the run record is marked interrupted.
    """

    stopper = StopOnSignal() if handle_signals else None
    if stopper is not None:
        stopper.install()
    try:
        cfg = _as_config(config, overrides)
        model_dir = model_dir or default_model_dir(cfg.run.model_dir, run_dir) or cfg.model_dir
        created = not os.path.isdir(model_dir)
        with translate_disk_full(model_dir, "model dir", kept="Nothing was trained."):
            os.makedirs(model_dir, exist_ok=True)
        try:
            # One training per model dir: the lock is held until the run record is complete.
            with model_dir_lock(model_dir):
                # Up front, before anything else is written: the model function's import, batch
                # sizes that split over the replicas, labels in range (preflight.py).
                estimator = build_estimator(cfg, model_dir=model_dir, model_fn=model_fn)
                check_job(cfg, estimator, has_eval=cfg.has_eval_data, scan_data=scan_data)
                return _locked_job(cfg, model_dir=model_dir, runs_dir=runs_dir, run_dir=run_dir, record=record,
                                   estimator=estimator, hooks=[*hooks, *([stopper] if stopper else [])],
                                   progress=progress, export=export, resume=resume, stopper=stopper)
        except BaseException:
            if created:  # a job that failed before writing anything leaves no empty model dir
                with contextlib.suppress(OSError):
                    os.rmdir(model_dir)
            raise
    finally:
        if stopper is not None:
            stopper.restore()


def _locked_job(cfg: JobConfig, *, model_dir, runs_dir, run_dir, record, estimator, hooks, progress, export, resume,
                stopper) -> JobResult:
    role = task_role()
    resumed_from_step = check_model_dir(cfg, model_dir, resume=resume)
    config_path = os.path.join(model_dir, CONFIG_FILE)
    previous_config = _read_text(config_path) if resumed_from_step is not None else None
    scratch = None
    if role.is_chief:
        with translate_disk_full(model_dir, "model dir's config.yaml", kept="Nothing was trained."):
            dump_config(cfg, config_path)
    else:  # a non-chief worker: same hooks and writes as the chief (same collectives), kept nowhere
        scratch = scratch_dir(role, "job", model_dir)
        runs_dir, run_dir = os.path.join(scratch, "runs"), None
    recorder = None
    if record:
        # the config as a plain dict: archived in the run (source.tar.gz) and read for its properties
        common = dict(config=cfg.to_dict(), flags=job_flags(cfg), script=cfg.source,
                      planned_rows=planned_rows(cfg), properties={"model_dir": os.path.abspath(model_dir),
                                                                     "resumed_from_step": resumed_from_step})
        runs_dir = run_dir or runs_dir or cfg.run.runs_dir or "runs"
        with translate_disk_full(runs_dir, "run record", kept="Nothing was trained."):
            recorder = RunRecorder.attach(run_dir, **common) if run_dir else RunRecorder.create(runs_dir, **common)
    log_path = recorder.run_dir / "output.log" if recorder else None
    with capture_log(log_path):
        # what a killed run left half-written (logged; only our own temp names). Only by the chief,
        # the model dir's owner: another worker would also delete the chief's temp files of
        # writes under way (config.yaml's: the chief then died renaming it, issue 19).
        if role.is_chief:
            remove_stale_temporaries(model_dir, [cfg.export.dir or os.path.join(model_dir, "export")])
        try:
            try:
                result = _train(cfg, estimator, recorder, hooks, progress, export,
                                export_scratch=os.path.join(scratch, "export") if scratch else None)
            except CheckpointMismatchError as exc:  # --resume with another architecture: refused, config kept
                if previous_config is not None and role.is_chief:
                    atomic_write_text(config_path, previous_config)
                recorded = yaml.safe_load(previous_config) if previous_config else None
                raise unappliable_settings_error(model_dir, recorded, cfg, exc.detail) from None
        except TrainingInterrupted as exc:
            logger.warning("%s", exc)
            if recorder is not None:
                recorder.interrupt(str(exc), step=exc.step)
            remove_scratch(scratch)
            raise
        except KeyboardInterrupt as exc:
            # A second signal (the CLI), or Ctrl-C / an interrupt from R without our handlers.
            interrupted = stopper.interrupted(None, aborted=True) if stopper is not None and \
                stopper.received is not None else None
            reason = str(interrupted) if interrupted else ("KeyboardInterrupt (Ctrl-C, or an interrupt from R): "
                                                           "a rerun resumes from the latest checkpoint")
            logger.warning("%s", reason)
            if recorder is not None:
                recorder.interrupt(reason)
            remove_scratch(scratch)
            if interrupted is not None:
                raise interrupted from exc
            raise
        except BaseException as exc:
            error = exc
            if is_disk_full(exc) and not isinstance(exc, DiskFullError):  # e.g. a run-record or summary write
                where = getattr(exc, "filename", None) or (recorder.run_dir if recorder else model_dir)
                error = disk_full_error(where, "training's files", kept=(
                    f"Training stopped; the last complete checkpoint in {model_dir} is intact and a rerun "
                    "resumes from it."))
            if recorder is not None:
                _fail_record(recorder, error)
            remove_scratch(scratch)
            if error is not exc:
                raise error from exc
            raise
    if recorder is not None:
        with _record_disk_full(recorder, result):
            recorder.complete()
    if scratch:
        remove_scratch(scratch)
        result = dataclasses.replace(result, run_dir=None, export_dir=None, exports={})
    return result


def _fail_record(recorder, exc: BaseException) -> None:
    """Marks the run failed; on a full runs folder the original error wins (the record stays
    `completed=FALSE`, the state it was created with)."""
    try:
        add_nonfinite_report(recorder, exc)
        recorder.fail(exc)
    except Exception as record_exc:
        if not is_disk_full(record_exc):
            raise
        logger.warning("could not mark the run %s failed: its disk is full", recorder.run_dir)


def _record_disk_full(recorder, result: JobResult):
    """A full runs folder after training: the training's results are kept and the one error
    says what was saved (checkpoints, exports) and what was not (the run record)."""
    saved = {"checkpoints": result.model_dir, **{f"export_{k}": v for k, v in result.exports.items()}}
    kept = (f"Training finished at global step {result.global_step} and its results are saved: checkpoints in "
            f"{result.model_dir}" + "".join(f", the {k} export in {v}" for k, v in result.exports.items())
            + f". The run record {recorder.run_dir} is incomplete (completed=FALSE).")
    return translate_disk_full(recorder.run_dir, "run record", kept=kept, saved=saved,
                               fix="Free some space in the runs folder (or pass --runs-dir on a larger disk); "
                                   "there is no need to train again.")


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return None


def _job_hooks(cfg: JobConfig, estimator, recorder, progress, hooks) -> list:
    """The hooks a job registers, in order: the NaN/Inf report first (it completes the error
    message other hooks see), logging, the run record, debug hooks, progress, the user's."""
    model_dir = estimator.model_dir
    # the NaN/Inf report's bundle holds the config as a file (config.yaml): a plain dict
    job_hooks: list = [NonFiniteReportHook(job_config=cfg.to_dict()), LoggingHook(cfg.run.log_every_n_loops)]
    if recorder is not None:
        job_hooks.append(SummaryHook(str(recorder.logs_dir)))
        job_hooks.append(HParamsHook(str(recorder.logs_dir), job_flags(cfg), trial_id=recorder.name))
        # metric rows (a row per loop, evaluations joining their loop's row, written before the
        # exporters and the caller's hooks run) and `end` heartbeats
        job_hooks.append(RecorderHook(recorder))
    job_hooks.extend(hooks_from_config(cfg.debug, logdir=str(recorder.logs_dir) if recorder else None,
                                       model_dir=model_dir))
    if progress is not None:
        job_hooks.append(ProgressCallbackHook(progress, cfg.train.max_steps))
    job_hooks.extend(hooks)
    return job_hooks


def _train(cfg, estimator, recorder, hooks, progress, export, export_scratch=None) -> JobResult:
    spec = data.resolve_section(cfg.data)
    model_dir = estimator.model_dir
    train_fn = input_fn_for(cfg, "train")
    eval_fn = input_fn_for(cfg, "eval") if cfg.has_eval_data else None
    job_hooks = _job_hooks(cfg, estimator, recorder, progress, hooks)
    exp = cfg.export
    export_base = export_scratch or exp.dir or os.path.join(model_dir, "export")
    serving_inputs = data_serving_inputs(spec)

    def metadata(est):  # in every export as it appears, the best one mid-training included
        return {EXPORT_META: export_metadata(cfg, est)}

    exporters = make_exporters(exp.exporters, export_base, keep=exp.keep, best_metric=exp.best_metric,
                               best_mode=exp.best_mode, serving_inputs=serving_inputs,
                               assets_extra=metadata) if export and exp.enabled else []
    eval_spec = EvalSpec(input_fn=eval_fn, steps=cfg.eval.steps, every_n_steps=cfg.eval.every_n_steps,
                         exporters=exporters, early_stopping=cfg.eval.early_stopping) if eval_fn else None
    max_steps = cfg.train.max_steps
    if cfg.train.steps is not None:
        max_steps = estimator.global_step + cfg.train.steps

    num_classes = DataParams.from_params(estimator.params).num_classes
    # an input error names its file and record, in the train data or (at an evaluation) the eval data
    with data.translate_errors(spec, "eval", num_classes=num_classes) if eval_fn else contextlib.nullcontext(), \
            data.translate_errors(spec, "train", num_classes=num_classes), \
            numerics.check_numerics(cfg.debug.check_numerics), numerics.translate_errors(estimator):
        try:
            outcome = train_and_evaluate(estimator, TrainSpec(input_fn=train_fn, max_steps=max_steps,
                                                              hooks=job_hooks), eval_spec)
        finally:
            checkpointing.remove_worker_scratch(estimator.state if estimator.built else None, model_dir)
    HookList(job_hooks).close()  # `Hook.close` is declared (a no-op by default); plain callables are wrapped
    exports = dict(outcome.exports)
    if export and exp.enabled and not exporters:
        exports["final"] = estimator.export_saved_model(os.path.join(export_base, "final"),
                                                        version=outcome.restored_step or outcome.global_step,
                                                        serving_inputs=serving_inputs,
                                                        assets_extra=metadata(estimator))
    for path in exports.values():
        if not is_export_dir(path):  # an export of an older version of this job, found at a rerun
            write_export_metadata(path, cfg, estimator)
        write_warmup(path, cfg, exp.warmup)
    if estimator.device_info.strategy_name == "multi_worker":
        sync_workers(estimator.strategy)  # no worker exits while another still writes
    export_dir = exports.get("final") or exports.get("best") or exports.get("latest")
    # `JobResult.config` is a plain dict: what R and the CLI's callers receive
    result = JobResult(run_dir=str(recorder.run_dir) if recorder else None, model_dir=model_dir, export_dir=export_dir,
                       metrics=outcome.metrics, history=outcome.history, global_step=outcome.global_step,
                       config=cfg.to_dict(), exports=exports, stopped_early=outcome.stopped_early,
                       best_step=outcome.best_step)
    if recorder is not None:
        with _record_disk_full(recorder, result):
            _record_results(recorder, data_spec=spec, estimator=estimator, outcome=outcome, export_dir=export_dir)
    return result


def _record_results(recorder, *, data_spec, estimator, outcome, export_dir) -> None:
    """The trained run's properties, final evaluation and export copy in its run record."""
    spec = estimator.spec
    opt = getattr(spec.optimizer, "inner_optimizer", spec.optimizer)
    recorder.set_properties(
        model=model_summary(spec.model), optimizer=type(opt).__name__,
        loss_function=getattr(spec.loss, "name", None) or type(spec.loss).__name__,
        global_step=outcome.global_step, stopped_early=str(outcome.stopped_early).upper(),
        **({"best_step": outcome.best_step} if outcome.best_step is not None else {}),
        **estimator.device_info.as_properties(),
        **({"ps_steps_by_worker": ",".join(f"{w}:{n}" for w, n in sorted(estimator.steps_by_worker.items()))}
           if estimator.steps_by_worker else {}),
        **({"export_dir": os.path.abspath(export_dir)} if export_dir else {}),
        **({"corrupt_records_skipped": data.corrupt_records_skipped()} if data_spec.skips_corrupt else {}))
    samples = data.num_examples(data_spec, "train") if hasattr(data, "num_examples") else None
    if samples:
        recorder.set_properties(samples=samples)
    if outcome.metrics:
        # without its `global_step`: with `restore_best` that is the best evaluation's step, and the
        # run's `global_step` property stays the step trained to (`best_step` says the other)
        recorder.write_evaluation({k: v for k, v in outcome.metrics.items() if k not in ("num_examples", "global_step")})
    if export_dir:
        recorder.add_artifact(export_dir, "export")
