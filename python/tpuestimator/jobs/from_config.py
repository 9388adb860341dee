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
    section = cfg.section("data")
    resolved = data.resolve_section(section) if section.get("manifest") or section.get("format") else {}
    if resolved.get("feature_columns") and "feature_columns" not in params:
        params["feature_columns"] = resolved["feature_columns"]  # a table: the canned models read its columns
    if resolved.get("task"):
        if params.get("task", resolved["task"]) != resolved["task"]:
            raise ConfigError("params.task", params["task"], f"{resolved['task']}: the table's label is "
                              f"{'a number' if resolved['task'] == 'regression' else 'a class'}")
        params["task"] = resolved["task"]
    if resolved.get("label_stats") and params.get("task") == "regression":
        params.setdefault("label_stats", resolved["label_stats"])  # the canned regressors' label scale
    vocab = data.vocabulary(section)
    if vocab and "vocabulary" not in params:
        params["vocabulary"] = list(vocab)
    if "num_classes" not in params and params.get("task") != "regression":
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
