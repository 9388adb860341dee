"""Tuning a canned model on a table: `tune_table` writes the table once, then trains one
separate run per combination of flag values (`tpuestimator.jobs.tune.tuning_run`: each its own
new model dir under ``<runs>/.models/``, its own run folder tagged ``tuning_run``), so the runs
are compared as any tuning's are (`ls_runs(order="eval_loss")`, R's `tpu_ls_runs()`,
`tfruns::compare_runs()`). R's `tpu_tuning_run(mpg ~ ., data = cars, flags = )` calls it.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from typing import Any


def table_data_dir(frame: Any, runs_dir: str, label: str, settings: Mapping[str, Any]) -> str:
    """Where a tuning writes its table: ``<runs>/.models/table-<label>-<digest>``, the digest of
    the rows and of what decides the written table, so the same tuning again (to continue an
    interrupted one) finds the same table and its state, and other rows get another folder."""
    import pandas as pd

    from tpuestimator.jobs.tune import MODELS_DIR

    digest = hashlib.sha1()
    digest.update(json.dumps([list(map(str, frame.columns)), [str(t) for t in frame.dtypes], dict(settings)],
                             sort_keys=True, default=str).encode())
    digest.update(pd.util.hash_pandas_object(frame.astype(object), index=False).to_numpy().tobytes())
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", label)[:40] or "label"
    return os.path.abspath(os.path.join(runs_dir, MODELS_DIR, f"table-{safe}-{digest.hexdigest()[:12]}"))


def tune_table(source: Any, *, label: str, flags: Mapping[str, Any], model: str = "dnn", task: str | None = None,
               split: float = 0.2, seed: int = 0, feature_columns: Mapping[str, Any] | None = None,
               missing: str | Mapping[str, str] | None = None, config: Mapping[str, Any] | None = None,
               runs_dir: str | None = None, sample: float | None = None, overrides: list[str] | tuple = (),
               early_stopping: bool | Mapping[str, Any] = True, **job_kwargs: Any) -> list:
    """Writes `source` as a table once and trains `model` on it once per combination of `flags`.

    Args:
      source: a pandas DataFrame, a `.csv` / `.parquet` path or a dict of columns.
      label, task, split, seed, feature_columns, missing: as `write_table`.
      flags: {flag: values}, e.g. ``{"learning_rate": [0.01, 0.1], "model": ["linear", "dnn"]}``;
        the canned models' short names (`learning_rate`, `hidden_units`, ...) work although
        the table's config leaves them at their defaults (as `train_table(flags=)`).
      model, config, early_stopping: as `train_table` (each combination stops early on the
        held-out split by default, and is compared on its best evaluation). runs_dir: default the config's `run.runs_dir`, else
        ``runs`` of the working folder; the table goes under its ``.models/``.
      sample, overrides, job_kwargs: as `jobs.tune.tuning_run`.

    Returns:
      One `JobResult` per combination trained (`tuning_run`).

    Raises:
      ConfigError: a flag that names no configuration field (before the table is written).
    """
    from tpuestimator.jobs.tune import flag_grid, tuning_run
    from tpuestimator.models.params import PARAM_DEFAULTS
    from tpuestimator.tables.api import table_config, table_flag_overrides, with_early_stopping
    from tpuestimator.tables.frames import read_table
    from tpuestimator.tables.stopping import early_stopping_config
    from tpuestimator.tables.write import write_table

    config = with_early_stopping(config, early_stopping_config(early_stopping))
    frame, _ = read_table(source)
    runs_dir = runs_dir or ((config or {}).get("run") or {}).get("runs_dir") or "runs"
    settings = {"label": label, "task": task, "split": split, "seed": seed, "feature_columns": feature_columns,
                "missing": missing}
    data_dir = table_data_dir(frame, runs_dir, label, settings)
    manifest_path = os.path.join(data_dir, "manifest.json")
    cfg = table_config(manifest_path, model=model, config=config)
    # The canned model's defaults written out, so a short flag name finds its field in every
    # combination (tuning_run maps the flags against this config).
    cfg["params"] = {**PARAM_DEFAULTS.get(model, {}), **dict(cfg.get("params") or {})}
    table_flag_overrides(cfg, model, list(overrides), flag_grid(flags)[0])  # a misspelt flag: before writing
    write_table(source, data_dir, label=label, task=task, split=split, seed=seed, feature_columns=feature_columns,
                missing=missing, overwrite=True)
    return tuning_run(cfg, flags, sample=sample, overrides=list(overrides), runs_dir=runs_dir, **job_kwargs)
