"""The data layer: TFRecord input pipelines, writers, Beam conversion, inspect and bench.

Importing `tpuestimator.data` does not import TensorFlow; the functions below load their
module (and TensorFlow) on first use.

- `make_input_fn(data_section, mode)` -> `input_fn(params)` (docs/ARCHITECTURE.md)
- `describe_features(data_section)` -> {name: (shape, tf.DType)} the model receives
- `num_classes(data_section)`, `vocabulary(data_section)`
- `translate_errors(data_section, mode)` context manager: TF input errors -> `DataError`
- `check_labels(data_section, mode, num_classes=)`: every label in range, before training
- `scan_files(data_section, mode, num_classes=)`: headers and first records of every file, before training
- `write_tfrecords(source, out_dir, ...)` (writers), `count_corrupt(pattern)`,
  `corrupt_records_skipped()`, `num_examples(data_section, mode)`

Layer 2: may import the contracts and `core` (`core.input_position`); never runs, hooks,
debug, serving, jobs, cluster or commands.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "make_input_fn": "pipeline",
    "client_layout_input": "pipeline",
    "build_dataset": "pipeline",
    "list_files": "pipeline",
    "parse_serialized": "pipeline",
    "describe_features": "spec",
    "model_features": "spec",
    "num_classes": "spec",
    "vocabulary": "spec",
    "resolve_section": "spec",
    "Manifest": "spec",
    "load_manifest": "spec",
    "translate_errors": "diagnose",
    "check_labels": "labels",
    "scan_files": "scan",
    "diagnose": "diagnose",
    "count_corrupt": "diagnose",
    "corrupt_records_skipped": "diagnose",
    "num_examples": "diagnose",
    "write_tfrecords": "writers",
    "inspect": "inspect",
    "bench": "bench",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module = importlib.import_module(f"tpuestimator.data.{_EXPORTS[name]}")
        return getattr(module, name)
    raise AttributeError(f"module 'tpuestimator.data' has no attribute {name!r}")
