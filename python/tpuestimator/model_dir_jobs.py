"""Jobs on a trained model dir (or the run folder that points to it): `evaluate_job` (the
latest checkpoint on the eval data or other files) and `export_job` (a SavedModel or a
.tflite file), with `resolve_model_dir` and `load_job_config` (the config the training wrote).

The CLI's `tpuestimator evaluate` / `export` and R's `tpu_evaluate()` / `tpu_export()` call
these (R through `tpuestimator.job`, which re-exports them).
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from tpuestimator import data
from tpuestimator.config import JobConfig, load_config
from tpuestimator.errors import ConfigError
from tpuestimator.from_config import build_estimator, input_fn_for
from tpuestimator.serving import write_export_metadata
from tpuestimator.spec import Mode


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
    """The config a job wrote into its model dir (``config.yaml``), with `overrides`."""
    return load_config(os.path.join(model_dir, "config.yaml"), overrides)


def evaluate_job(model_dir: str, *, overrides: Iterable[str] = (), data_pattern: str | None = None) -> dict:
    """Evaluates the latest checkpoint of a trained model dir (or run folder)."""
    model_dir = resolve_model_dir(model_dir)
    cfg = load_job_config(model_dir, overrides)
    estimator = build_estimator(cfg, model_dir=model_dir)
    if estimator.latest_checkpoint() is None:
        raise ConfigError("MODEL_DIR", model_dir, "a model dir holding a checkpoint (train first)")
    input_fn = input_fn_for(cfg, "eval", data_pattern)
    # the section the input reads (with --data's files): an error names the file and record read
    with data.translate_errors(input_fn.data_section, "eval", num_classes=estimator.params.get("num_classes")):
        return estimator.evaluate(input_fn)


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
