"""The model-dir rule: a run never silently continues a checkpoint trained with other settings.

A model dir holds the checkpoints of ONE training and the resolved config that made them
(``config.yaml``, written by every job). Before a job trains, `check_model_dir()` compares
that recorded config with the new one:

- no checkpoint in the model dir: a new training, nothing to check;
- the same settings (differences only in `RESUMABLE_FIELDS`: how long to train, evaluation,
  export, logging, where runs go): the job resumes from the checkpoint, and the run records
  ``resumed_from_step``. A rerun of the identical command therefore still resumes;
- other differences (``params.learning_rate``, ``model``, ``data.train``, ...), a checkpoint
  without a recorded config, or a checkpoint already at or past ``train.max_steps`` (nothing
  would be trained): `ModelDirConflictError`, naming the fields with both values and the three
  ways out: ``--resume`` (``resume=TRUE`` in R) to continue anyway, another model dir, or
  ``train.warm_start_from`` to start a new training from the checkpoint's weights.

Tuning runs (``tpuestimator tune``, ``tpu_tuning_run()``) and runs inside tfruns's
``training_run()`` get a model dir of their own, so they never meet an old checkpoint.
docs/RUN_FORMAT.md ("Model dirs and checkpoint reuse") documents the rule. Nothing here
imports TensorFlow.
"""
from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tpuestimator.config import JobConfig
from tpuestimator.errors import TPUEstimatorError

CONFIG_FILE = "config.yaml"
# Fields that may change between the run that wrote a checkpoint and the run that resumes it:
# a dotted name covers everything under it.
RESUMABLE_FIELDS = (
    "name", "eval", "export", "predict", "debug",
    "train.max_steps", "train.steps", "train.keep_checkpoint_max", "train.save_checkpoints_steps",
    "train.async_checkpoint", "train.iterations_per_loop",
    "data.eval",
    "data.service", "data.service_sharding", "data.service_compression", "data.service_job",  # where the input runs
    "run.runs_dir", "run.model_dir", "run.log_every_n_loops", "run.project", "run.tpu", "run.zone",
    "run.num_cpu_devices", "run.strategy", "run.jit_compile",
)


class ModelDirConflictError(TPUEstimatorError, ValueError):
    """The model dir holds a checkpoint that this job must not silently continue.

    Attributes:
      model_dir: the model dir.
      step: the checkpoint's global step.
      differences: {field: (recorded value, new value)}.
    """

    def __init__(self, message: str, *, model_dir: str, step: int, differences: Mapping[str, tuple]):
        self.model_dir = model_dir
        self.step = step
        self.differences = dict(differences)
        super().__init__(message)


def checkpoint_step(model_dir: str | os.PathLike) -> int | None:
    """The global step of the latest checkpoint in `model_dir` (from TensorFlow's ``checkpoint``
    index file), or None when there is none."""
    index = Path(model_dir) / "checkpoint"
    if not index.is_file():
        return None
    try:
        text = index.read_text(encoding="utf-8")
    except OSError:
        return None
    found = re.search(r'^model_checkpoint_path:\s*"([^"]*)"', text, flags=re.M)
    if not found:
        return None
    tail = re.search(r"-(\d+)$", found.group(1))
    return int(tail.group(1)) if tail else 0


def _normal(value: Any) -> Any:
    """A value as it reads back from config.yaml (tuples as lists, keys as text)."""
    return yaml.safe_load(yaml.safe_dump(json.loads(json.dumps(value, default=str)), sort_keys=False))


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, Mapping) and node:
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(_flatten(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: node}


def _resumable(field: str) -> bool:
    return any(field == f or field.startswith(f + ".") for f in RESUMABLE_FIELDS)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=0.0)
    return a == b


def config_differences(recorded: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """{field: (recorded, new)} for every field outside `RESUMABLE_FIELDS` that differs."""
    old_flat, new_flat = _flatten(_normal(dict(recorded))), _flatten(_normal(dict(new)))
    out = {}
    for field in sorted(set(old_flat) | set(new_flat)):
        if _resumable(field):
            continue
        a, b = old_flat.get(field), new_flat.get(field)
        if not _same(a, b):
            out[field] = (a, b)
    return out


def ways_out(model_dir: str) -> str:
    """The choices a refused model dir leaves (resume, a new model dir, a warm start), one sentence."""
    return ("Choose one: pass --resume (R: resume = TRUE) to continue from this checkpoint anyway; train "
            "into a new model dir (--model-dir DIR, R: model_dir =, or run.model_dir); or start a new "
            f"training from its weights with --set train.warm_start_from={model_dir} and a new model dir.")


def check_model_dir(config: JobConfig, model_dir: str | os.PathLike, *, resume: bool = False) -> int | None:
    """Applies the model-dir rule (module docstring) before a job trains into `model_dir`.

    Args:
      config: the job's configuration.
      model_dir: the model dir the job will train into.
      resume: continue from an existing checkpoint even when the settings differ.

    Returns:
      The step the job resumes from (``resumed_from_step``), or None for a new training.

    Raises:
      ModelDirConflictError: the checkpoint was trained with other settings, has no recorded
        config, or is already at or past ``train.max_steps``; the message names the fields and
        the choices.
    """
    model_dir = str(model_dir)
    step = checkpoint_step(model_dir)
    if step is None:
        return None
    if resume:
        return step
    recorded_path = Path(model_dir) / CONFIG_FILE
    recorded = None
    if recorded_path.is_file():
        try:
            recorded = yaml.safe_load(recorded_path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            recorded = None
    if not isinstance(recorded, Mapping):
        raise ModelDirConflictError(
            f"model dir {model_dir} holds a checkpoint (step {step}) without a readable {CONFIG_FILE}, so "
            f"nothing says which settings trained it. {ways_out(model_dir)}",
            model_dir=model_dir, step=step, differences={})
    differences = config_differences(recorded, config.to_dict())  # field by field against the recorded file
    if differences:
        shown = "; ".join(f"{field}: {old!r} -> {new!r}" for field, (old, new) in differences.items())
        raise ModelDirConflictError(
            f"model dir {model_dir} holds a checkpoint (step {step}) trained with other settings ({shown}); "
            f"continuing it would record these settings with that training's results. {ways_out(model_dir)}",
            model_dir=model_dir, step=step, differences=differences)
    max_steps = config.train.max_steps
    if config.train.steps is None and isinstance(max_steps, int) and not isinstance(max_steps, bool) \
            and step > max_steps:
        raise ModelDirConflictError(
            f"model dir {model_dir} holds a checkpoint at step {step}, past train.max_steps={max_steps}: nothing "
            f"would be trained, and the run would record max_steps={max_steps} with a {step}-step model. "
            f"{ways_out(model_dir)}",
            model_dir=model_dir, step=step, differences={"train.max_steps": (None, max_steps)})
    return step


# Model-function params that take effect on a resumed checkpoint (the optimizer's, the dropout
# rates): never named as settings that cannot.
APPLIED_PARAMS = ("learning_rate", "optimizer", "momentum", "beta_1", "beta_2", "epsilon", "weight_decay",
                  "clipnorm", "clipvalue", "dropout", "dprob")


def unappliable_settings_error(model_dir: str | os.PathLike, recorded_config: Mapping[str, Any] | None,
                               config: JobConfig, detail: str) -> ModelDirConflictError:
    """The error for a resumed job (``--resume``) whose changed settings cannot take effect on
    the checkpoint: the model it builds has other variables (shapes, layers) than the checkpoint.

    Optimizer settings (the learning rate: `tpuestimator.core.checkpointing.restore`), the data,
    the steps take effect on resume; an architecture cannot. Names the changed settings with
    both values (from `recorded_config`, the model dir's config before this job) and the fix.
    """
    model_dir = str(model_dir)
    step = checkpoint_step(model_dir)
    differences = config_differences(recorded_config, config.to_dict()) if isinstance(recorded_config, Mapping) else {}
    shaping = {f: d for f, d in differences.items() if (f == "model" or f.startswith(("model.", "params.")))
               and f.split(".")[1 if "." in f else 0] not in APPLIED_PARAMS}
    shown = "; ".join(f"{field}: {old!r} -> {new!r}" for field, (old, new) in (shaping or differences).items())
    what = (f"these changed settings cannot take effect on it: {shown}" if shown else
            "the model function now builds other variables than the checkpoint holds (was its code changed?)")
    return ModelDirConflictError(
        f"model dir {model_dir} holds a checkpoint (step {step}) whose variables do not fit the model this config "
        f"builds, so {what}. --resume applies changed settings that can take effect on a checkpoint (the learning "
        "rate and other optimizer settings, data, steps), never an architecture. Train into a new model dir "
        "(--model-dir DIR, R: model_dir =, or run.model_dir), or resume with the recorded values. Nothing was "
        f"trained. (TensorFlow: {detail})",
        model_dir=model_dir, step=step if step is not None else 0, differences=shaping or differences)


MODELS_DIR = ".models"


def default_model_dir(model_dir_setting: str | None, run_dir: str | os.PathLike | None) -> str | None:
    """The model dir of a job recording into an existing run folder (tfruns's active run),
    when neither the caller nor ``run.model_dir`` chose one: ``<runs folder>/.models/<run>``.

    tfruns's ``training_run()`` copies the working dir's changed files into the run, except
    paths that contain the run's name, and its ``fileSnapshot()`` skips hidden folders
    (R/training_run.R, with_changed_file_copy()): this path is skipped on both counts, so the
    checkpoints are not copied (being inside the runs folder alone would not be enough). Outside
    the run folder, so the export is stored once (as the
    run's ``export/``); one per run, so a tfruns run never meets another run's checkpoint.
    None when `run_dir` is None or ``run.model_dir`` (`model_dir_setting`) is set.
    """
    if run_dir is None or model_dir_setting:
        return None
    run_dir = Path(run_dir)
    return str(run_dir.parent / MODELS_DIR / run_dir.name)
