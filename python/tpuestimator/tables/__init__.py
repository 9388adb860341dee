"""Tables: data frames, CSV and Parquet files in, feature columns inferred, canned models out.

Importing `tpuestimator.tables` does not import TensorFlow; the functions below load their
module on first use.

- `write_table(source, out_dir, label=, task=, split=, feature_columns=, missing=)` (write):
  TFRecords + a manifest holding the inferred `feature_columns` and the `task`
- `infer_feature_columns(source, label=, ...)` (write): the same inference, nothing written
- `train_table(source, label=, model=, out_dir=, ...)` (api): write, then train a canned model
- `tune_table(source, label=, flags=, model=, ...)` (tune): write once, then one run per
  combination of flag values, as `jobs.tune.tuning_run` (R's `tpu_tuning_run(mpg ~ ., data =)`)
- `predict_table(export_dir, frame)` (api): predictions for a data frame from an export
- `predict_table_to_file(export_dir, table.csv, out.csv)` (predict): the same, a CSV / Parquet
  file read and its predictions written chunk by chunk (atomically)
- the feature-column spec is `tpuestimator.models.feature_columns`, the Keras preprocessing layers
  `tpuestimator.models.table_preprocessing` (both used by the data layer and the models)
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "write_table": "write",
    "infer_feature_columns": "write",
    "train_table": "api",
    "predict_table": "api",
    "predict_table_to_file": "predict",
    "table_config": "api",
    "tune_table": "tune",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module = importlib.import_module(f"tpuestimator.tables.{_EXPORTS[name]}")
        return getattr(module, name)
    raise AttributeError(f"module 'tpuestimator.tables' has no attribute {name!r}")
