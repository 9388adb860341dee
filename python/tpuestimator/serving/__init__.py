"""Serving: what is done with an export. Its data signatures and reading it back (`exports`:
`data_serving_inputs`, `open_export`, `predict`, `resolve_export_dir`), streaming batch
prediction (`batch_predict`) into CSV/Parquet files (`prediction_files`), TF Serving warmup
requests (`warmup`), LiteRT/TFLite conversion and verification (`litert`) and offline
classification metrics (`classification_metrics`).

Layer 6: may import contracts, core, data and runs; never hooks, debug, jobs, cluster or
commands. The names below are the user-facing ones (`from tpuestimator.serving import
predict`); they load TensorFlow only when called.
"""
from tpuestimator.core.signatures import ServingInput
from tpuestimator.serving.exports import (
    LoadedExport,
    data_serving_inputs,
    is_export_dir,
    load_export,
    open_export,
    predict,
    resolve_export_dir,
)

__all__ = ["LoadedExport", "ServingInput", "data_serving_inputs", "is_export_dir", "load_export", "open_export",
           "predict", "resolve_export_dir"]
