"""Tables from Python and R in one call each: `train_table` (write the table, train a canned
model, export it) and `predict_table` (a data frame through an export's raw-features
signature). R's `tpu_train(df, label =)` and `predict(run, newdata =)` call these.
"""
from __future__ import annotations

import copy
import logging
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

MODELS = ("linear", "dnn", "wide_and_deep")


def table_config(manifest: str, *, model: str = "dnn", config: Mapping[str, Any] | None = None) -> dict:
    """A job config (dict) training `model` on the table of `manifest`; `config` sections are
    merged over it (e.g. `{"train": {"max_steps": 500}, "params": {"hidden_units": [16]}}`)."""
    out: dict[str, Any] = {"model": model, "data": {"manifest": os.fspath(manifest)},
                           "train": {"batch_size": 32, "max_steps": 1000}, "eval": {"batch_size": 64}}
    for section, value in (config or {}).items():
        if isinstance(value, Mapping) and isinstance(out.get(section), Mapping):
            out[section] = {**out[section], **copy.deepcopy(dict(value))}
        else:
            out[section] = copy.deepcopy(value)
    return out


def table_flag_overrides(cfg: Mapping[str, Any], model: str, overrides: list[str],
                         flags: Mapping[str, Any]) -> list[str]:
    """``key=value`` overrides for `flags` on the table config `cfg` (with `overrides` applied).

    The canned models read parameters the table config leaves out (`learning_rate`,
    `hidden_units`, ...; `models.canned.PARAM_DEFAULTS`), so their short names are looked up
    as if the config held the defaults: ``learning_rate`` sets ``params.learning_rate`` as it
    does for a config that names it.
    """
    from tpuestimator.config import load_config
    from tpuestimator.models.canned import PARAM_DEFAULTS
    from tpuestimator.runs.flags import flag_overrides

    with_defaults = dict(cfg)
    with_defaults["params"] = {**PARAM_DEFAULTS.get(model, {}), **dict(cfg.get("params") or {})}
    return flag_overrides(load_config(with_defaults, overrides), flags)


def train_table(source: Any, *, label: str, out_dir: str | os.PathLike, model: str = "dnn",
                task: str | None = None, split: float = 0.2, seed: int = 0,
                feature_columns: Mapping[str, Any] | None = None, missing: str | Mapping[str, str] | None = None,
                config: Mapping[str, Any] | None = None, runs_dir: str | None = None,
                model_dir: str | None = None, flags: Mapping[str, Any] | None = None, **job_kwargs):
    """Writes `source` as a table under `out_dir/data`, trains `model` on it into `out_dir/model`
    (evaluating on the held-out split, exporting at the end) and returns the `JobResult`.

    Args:
      source: a pandas DataFrame, a `.csv` / `.parquet` path or a dict of columns.
      label, task, split, seed, feature_columns, missing: as `write_table`.
      model: `linear`, `dnn` or `wide_and_deep` (or any model name a config takes).
      config: config sections merged over the defaults (`table_config`).
      runs_dir: where the run record goes, as for every job: default the config's
        `run.runs_dir`, else ``runs`` of the working folder (where `ls_runs` and tfruns look).
      model_dir: default `out_dir/model`.
      flags: a run's flags (tfruns's FLAGS from R) applied after the overrides, named as
        `tpuestimator.runs.flags` maps them; see `table_flag_overrides`.
      job_kwargs: passed to `tpuestimator.jobs.job.run_job` (overrides, progress, hooks, ...).

    Raises:
      ConfigError: a flag that names no configuration field (before anything is written).
    """
    from tpuestimator.jobs.job import run_job
    from tpuestimator.tables.write import write_table

    out_dir = os.path.abspath(os.fspath(out_dir))
    if flags:
        # Mapped against the config the training will use (its manifest is written below), so
        # an unknown flag stops the call before the table is written.
        planned = table_config(os.path.join(out_dir, "data", "manifest.json"), model=model, config=config)
        overrides = list(job_kwargs.get("overrides", ()))
        job_kwargs["overrides"] = overrides + table_flag_overrides(planned, model, overrides, flags)
    manifest = write_table(source, os.path.join(out_dir, "data"), label=label, task=task, split=split, seed=seed,
                           feature_columns=feature_columns, missing=missing, overwrite=True)
    cfg = table_config(manifest["path"], model=model, config=config)
    return run_job(cfg, model_dir=model_dir or os.path.join(out_dir, "model"),
                   runs_dir=runs_dir, **job_kwargs)


def predict_table(export_dir: str | os.PathLike, frame: Any, *, batch_size: int = 1024,
                  chunk_rows: int | None = None) -> dict[str, np.ndarray]:
    """Predictions for a data frame (or CSV / Parquet path, read in chunks of `chunk_rows`) from
    a table model's export, in memory (`tables.predict.predict_table_to_file` writes a file
    chunk by chunk instead).

    Returns:
      columns: `prediction` (regression), or `class`, `class_id` and `prob_<class>` per class.
      Unseen categories go to the out-of-vocabulary bucket.

    Raises:
      ConfigError: the export is not a table model's. DataError: see `tables.predict.table_inputs`.
    """
    from tpuestimator.tables.predict import CHUNK_ROWS, iter_table_predictions

    out: dict[str, list] = {}
    chunk_rows = CHUNK_ROWS if chunk_rows is None else chunk_rows  # 0 is refused, not the default
    for columns in iter_table_predictions(export_dir, frame, chunk_rows=chunk_rows, batch_size=batch_size):
        for key, values in columns.items():
            out.setdefault(key, []).append(values)
    return {k: np.concatenate(v) for k, v in out.items()}
