"""Exports from R (`tpu_export()`, `tpu_predict()`, `tpu_evaluate()`): the core's export jobs and
the SavedModel readers (`tpuestimator.jobs.export_jobs`, `tpuestimator.serving`), plain values back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .interrupts import r_interruptible


@r_interruptible
def evaluate_export(export_dir: str, data_pattern: str | None = None, runs_dir: str | None = None,
                    record: bool = True) -> dict:
    """Offline evaluation of an export: metrics, per-class table, confusion matrix, run folder."""
    from tpuestimator.jobs.export_jobs import evaluate_export as _evaluate_export

    return _evaluate_export(export_dir, data_pattern=data_pattern, runs_dir=runs_dir, record=record)


@r_interruptible
def predict_files(export_dir: str, files: Sequence[str], batch_size: int = 1024) -> dict:
    """Streaming predictions over TFRecord/image files or patterns, as {column: list}."""
    from tpuestimator.jobs.export_jobs import predict_columns

    return predict_columns(export_dir, list(files), batch_size=int(batch_size))


@r_interruptible
def predict_to_file(export_dir: str, files: Sequence[str], out: str, batch_size: int = 1024) -> dict:
    """Streaming predictions written to a .csv or .parquet file; {path, rows, format}."""
    from tpuestimator.jobs.export_jobs import predict_to_file as _predict_to_file

    return _predict_to_file(export_dir, list(files), out, batch_size=int(batch_size))


@r_interruptible
def export_job(model_dir: str, export_dir: str, format: str = "saved_model") -> Any:
    """Exports the latest checkpoint in `model_dir`; returns the export's path."""
    from tpuestimator.jobs.model_dir_jobs import export_job as _export_job

    return _export_job(model_dir, export_dir, format=format)


@r_interruptible
def export_model(model_dir: str, export_dir: str, format: str = "saved_model", quantize: str | None = None,
                 warmup: int | None = None, representative_batches: int | None = None) -> dict:
    """Exports the latest checkpoint in `model_dir`: `path`, `saved_model`, `tflite` (the .tflite's
    verification report or None), `warmup_requests`."""
    import dataclasses

    from tpuestimator.jobs.model_dir_jobs import export_model as _export_model

    result = _export_model(model_dir, export_dir, format=format, quantize=quantize, warmup=warmup,
                           representative_batches=representative_batches)
    return dataclasses.asdict(result)


@r_interruptible
def predict(export_dir: str, features: Any) -> list[dict]:
    """Per-example predictions of the SavedModel in `export_dir`."""
    from tpuestimator.serving.exports import predict as _predict

    return _predict(export_dir, features)


def resolve_export_dir(path: str) -> str:
    """The SavedModel a run, model or export folder means (`tpuestimator.serving.exports.resolve_export_dir`)."""
    from tpuestimator.serving.exports import resolve_export_dir as _resolve_export_dir

    return _resolve_export_dir(path)


def export_info(export_dir: str) -> dict | None:
    """An export's metadata (`tpuestimator.serving.export_info.ExportInfo`, as its file's dict),
    None for a folder tpuestimator did not export: what R reads of an export (class names, the
    feature spec), from the one reader."""
    from tpuestimator.serving.export_info import read_export_info

    info = read_export_info(export_dir)
    return info.to_dict() if info is not None else None


def is_export_dir(path: str) -> bool:
    """Whether `path` is an export tpuestimator wrote (`tpuestimator.serving.exports.is_export_dir`)."""
    from tpuestimator.serving.exports import is_export_dir as _is_export_dir

    return _is_export_dir(path)
