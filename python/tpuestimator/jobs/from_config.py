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


def model_params(cfg: JobConfig) -> dict:
    """The config's params plus what the data defines (num_classes, vocabulary, image)."""
    params = cfg.params
    spec = data.resolve_section(cfg.data) if cfg.data.manifest or cfg.data.format else None
    if spec is not None and spec.feature_columns and "feature_columns" not in params:
        params["feature_columns"] = dict(spec.feature_columns)  # a table: the canned models read its columns
    if spec is not None and spec.task:
        if params.get("task", spec.task) != spec.task:
            raise ConfigError("params.task", params["task"], f"{spec.task}: the table's label is "
                              f"{'a number' if spec.task == 'regression' else 'a class'}")
        params["task"] = spec.task
    if spec is not None and spec.label_stats and params.get("task") == "regression":
        params.setdefault("label_stats", spec.label_stats)  # the canned regressors' label scale
    vocab = data.vocabulary(spec or cfg.data)
    if vocab and "vocabulary" not in params:
        params["vocabulary"] = list(vocab)
    if "num_classes" not in params and params.get("task") != "regression":
        n = data.num_classes(spec or cfg.data)
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
    train = mode == "train"
    if pattern is None and not (cfg.data.train if train else cfg.data.eval) and cfg.data.manifest is None:
        raise ConfigError(f"data.{'train' if train else 'eval'}", None,
                          f"a TFRecord file pattern to {'train' if train else 'evaluate'} on")
    spec = data.resolve_section(cfg.data)
    if pattern is not None:
        spec = spec.replace(train=pattern) if train else spec.replace(eval=pattern)
    return data.make_input_fn(spec, mode)
