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

from tpuestimator.errors import ConfigError, DataError
from tpuestimator.models.feature_columns import missing_default, missing_mask, record_columns
from tpuestimator.tables.frames import column_values, read_table

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
      runs_dir, model_dir: default `out_dir/runs` and `out_dir/model`.
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
                   runs_dir=runs_dir or os.path.join(out_dir, "runs"), **job_kwargs)


def table_inputs(frame: Any, columns: Mapping[str, dict], *, where: str = "newdata",
                 first_row: int = 0) -> dict[str, np.ndarray]:
    """A data frame's columns as the raw inputs of an export's `features` signature: each column
    converted to its dtype, a missing value replaced by its policy's default. `first_row`: the
    frame's first row in the whole table (a chunk's), for the row numbers in messages.

    Raises:
      DataError: a feature column is absent from the frame, or holds a missing value the column's
        policy does not allow, or a value of the wrong type.
    """
    frame, _ = read_table(frame)
    out = {}
    for name, column in record_columns(columns).items():
        if name not in frame.columns:
            raise DataError(f"{where}: column {name!r} is missing; the model was trained on the columns "
                            f"{sorted(record_columns(columns))}. Add it (values may be NA where the column has a "
                            "missing-value policy).", feature=name)
        values, _ = column_values(frame[name])
        mask = missing_mask(values)
        default = missing_default(column)
        if mask.any() and default is None:
            rows = np.flatnonzero(mask)
            raise DataError(f"{where}: column {name!r} has {int(mask.sum())} missing value(s) (NA), e.g. row "
                            f"{first_row + int(rows[0]) + 1}, and the model was trained with no missing-value policy for it. "
                            "Fill them, or retrain with missing={" + repr(name) + ": 'mean'|'zero'|'oov'}.",
                            feature=name, record=first_row + int(rows[0]))
        out[name] = _convert(name, values, mask, column, default, where, first_row)
    return out


def _convert(name, values, mask, column, default, where, first_row=0) -> np.ndarray:
    dtype = column["dtype"]
    result = []
    for i, v in enumerate(values):
        if mask[i]:
            result.append(default)
            continue
        try:
            if dtype == "float32":
                result.append(float(v))
            elif dtype == "int64":
                f = float(v)
                if not f.is_integer():
                    raise ValueError
                result.append(int(f))
            else:
                result.append("TRUE" if v is True or v is np.True_ else "FALSE" if v is False or v is np.False_
                              else (str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)))
        except (TypeError, ValueError):
            raise DataError(f"{where}: column {name!r} row {first_row + i + 1} holds {v!r}; the model takes "
                            f"{'numbers' if dtype == 'float32' else 'whole numbers'} there. Fix the value.",
                            feature=name, record=first_row + i) from None
    return np.asarray(result, dtype=object if dtype == "string" else (np.float32 if dtype == "float32" else np.int64))


def predict_table(export_dir: str | os.PathLike, frame: Any, *, batch_size: int = 1024,
                  chunk_rows: int | None = None) -> dict[str, np.ndarray]:
    """Predictions for a data frame (or CSV / Parquet path, read in chunks of `chunk_rows`) from
    a table model's export, in memory (`tables.predict.predict_table_to_file` writes a file
    chunk by chunk instead).

    Returns:
      columns: `prediction` (regression), or `class`, `class_id` and `prob_<class>` per class.
      Unseen categories go to the out-of-vocabulary bucket.

    Raises:
      ConfigError: the export is not a table model's. DataError: see `table_inputs`.
    """
    from tpuestimator.tables.predict import CHUNK_ROWS, iter_table_predictions

    out: dict[str, list] = {}
    for columns in iter_table_predictions(export_dir, frame, chunk_rows=chunk_rows or CHUNK_ROWS,
                                          batch_size=batch_size):
        for key, values in columns.items():
            out.setdefault(key, []).append(values)
    return {k: np.concatenate(v) for k, v in out.items()}
