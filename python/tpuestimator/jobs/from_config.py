"""From a job's config to what the Estimator takes: the model's params (`model_params`), the
Estimator (`build_estimator`) and the input functions of the `data` section (`input_fn_for`).

Shared by the training job (job.py), the jobs on a trained model dir (model_dir_jobs.py) and
the readiness checks (check.py).
"""
from __future__ import annotations

from tpuestimator import data
from tpuestimator.config import JobConfig
from tpuestimator.core.estimator import Estimator, RunConfig
from tpuestimator.errors import ConfigError
from tpuestimator.models.params import with_data


def model_params(cfg: JobConfig) -> dict:
    """The config's params plus what the data defines (task, num_classes, vocabulary, a table's
    columns and label scale): the plain dict the model function receives (`models.params.with_data`)."""
    spec = data.resolve_section(cfg.data) if cfg.data.manifest or cfg.data.format else None
    return with_data(cfg.params, task=spec.task if spec is not None else None,
                     num_classes=data.num_classes(spec or cfg.data), vocabulary=data.vocabulary(spec or cfg.data),
                     feature_columns=spec.feature_columns if spec is not None else None,
                     label_stats=spec.label_stats if spec is not None else None)


def build_estimator(cfg: JobConfig, *, model_dir: str | None = None, model_fn=None):
    """An Estimator for a config (the model function from `model` unless given)."""
    return Estimator(model_fn or cfg.model, RunConfig.from_job(cfg, model_dir=model_dir), model_params(cfg))


def input_fn_for(cfg: JobConfig, mode: str, pattern: str | None = None):
    """The input function of a config's `data` section for `mode` (`pattern` replaces the files)."""
    train = mode == "train"
    if pattern is None and not (cfg.data.train if train else cfg.data.eval) and cfg.data.manifest is None:
        raise ConfigError(f"data.{'train' if train else 'eval'}", None,
                          f"a TFRecord file pattern to {'train' if train else 'evaluate'} on")
    spec = data.resolve_section(cfg.data)
    if pattern is not None:
        spec = spec.replace(train=pattern) if train else spec.replace(eval=pattern)
    return data.make_input_fn(spec, mode)
