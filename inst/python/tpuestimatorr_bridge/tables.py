"""The tables from R (`tpu_train(formula, data =)`, `tpu_tuning_run(formula, data =)`, `tpu_predict()`
of a table model): R's data frames in, the core's table API (`tpuestimator.tables`) called with
its messages written in R's syntax (`_r_syntax`), plain values back."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from .interrupts import r_interruptible


def table_frame(frame: Any, na_columns: Mapping[str, Sequence[Any]] | None = None, rows: int | None = None):
    """An R data frame (a pandas DataFrame through reticulate) with the columns whose NA reticulate
    cannot carry (character and logical: R sends them as lists with None) put back, and its first
    `rows` rows only (R sends a one-row frame as two copies of the row: see `r_table_to_py`)."""
    import pandas as pd

    frame = frame.copy()
    for name, values in (na_columns or {}).items():
        frame[name] = pd.Series(list(values), dtype=object, index=frame.index)
    return frame if rows is None else frame.iloc[:int(rows)]


@contextlib.contextmanager
def _r_syntax():
    """Errors and notes raised inside written for the R user who reads them: their fixes in R
    (`missing = list(x = "mean")`, `task = "regression"`, not Python's dict and keywords), by
    `tpuestimator.errors.message_syntax`."""
    from tpuestimator.errors import message_syntax

    with message_syntax("r"):
        yield


@r_interruptible
def train_table(frame: Any, label: str, out_dir: str, model: str = "dnn", task: str | None = None,
                split: Any = 0.2, feature_columns: Mapping[str, Any] | None = None,
                missing: Any = None, overrides: Sequence[str] = (), flags_json: str | None = None,
                **job_kwargs: Any) -> Any:
    """`tpuestimator.tables.train_table` from R (config overrides as `section.field=value` strings,
    a run's flags as the JSON text of an R list, mapped by `tpuestimator.config_flags`)."""
    from tpuestimator.tables import train_table as _train_table

    flags = json.loads(flags_json) if flags_json else None
    with _r_syntax():
        return _train_table(frame, label=label, out_dir=out_dir, model=model, task=task, split=split,
                            feature_columns=feature_columns, missing=missing, overrides=list(overrides), flags=flags,
                            **job_kwargs)


@r_interruptible
def tune_table(frame: Any, label: str, flags_json: str, model: str = "dnn", task: str | None = None,
               split: float = 0.2, feature_columns: Mapping[str, Any] | None = None, missing: Any = None,
               overrides: Sequence[str] = (), sample: float | None = None, runs_dir: str | None = None,
               on_run: Any = None, **job_kwargs: Any) -> list[str]:
    """`tpu_tuning_run(formula, data =)`: `tpuestimator.tables.tune_table`; returns the run folders
    trained. `on_run(i, n, label)` (an R function) hears of each combination before it trains."""
    from tpuestimator.tables import tune_table as _tune_table

    def announce(i: int, n: int, combo: dict) -> None:
        if on_run is not None:
            on_run(i, n, ", ".join(f"{k}={v}" for k, v in combo.items()))

    with _r_syntax():
        results = _tune_table(frame, label=label, flags=json.loads(flags_json), model=model, task=task,
                              split=float(split), feature_columns=feature_columns, missing=missing,
                              overrides=list(overrides), sample=None if sample is None else float(sample),
                              runs_dir=runs_dir, on_run=announce, **job_kwargs)
    return [str(r.run_dir) for r in results if r.run_dir]


def table_task_note(frame: Any, label: str) -> str | None:
    """The line saying which task `tpu_train()` infers from the label column, why, and how to
    choose the other (`tpuestimator.tables.frames.task_from_label`); None when there is no such column."""
    from tpuestimator.tables.frames import column_values, read_table, task_from_label, task_message

    frame, _ = read_table(frame)
    if label not in frame.columns:
        return None
    task, why = task_from_label(*column_values(frame[label]))
    return task_message(label, task, why, syntax="r")


def default_table_dir(label: str, model: str, run_dir: str | None = None) -> str:
    """A table model's folder when R names none (`tpuestimator.tables.api.default_table_dir`)."""
    from tpuestimator.tables.api import default_table_dir as _default_table_dir

    return _default_table_dir(label, model, run_dir)


def table_export(export_dir: str) -> dict | None:
    """The table an export was trained on ({feature_columns, task, label}), None for other exports."""
    from tpuestimator.serving import open_export

    table = open_export(export_dir).info.table
    return table.to_dict() if table is not None else None


@r_interruptible
def predict_table(export_dir: str, frame: Any) -> dict:
    """Predictions for a data frame from a table model's export, as {column: list}."""
    from tpuestimator.tables import predict_table as _predict_table

    with _r_syntax():
        return {k: v.tolist() for k, v in _predict_table(export_dir, frame).items()}


@r_interruptible
def predict_table_file(export_dir: str, path: str, chunk_rows: int = 65536, batch_size: int = 1024) -> dict:
    """A table model's predictions for a .csv/.parquet file read `chunk_rows` rows at a time, as
    {column: list}: only the predictions are kept, never more than one chunk of the table."""
    from tpuestimator.tables.predict import iter_table_predictions

    out: dict[str, list] = {}
    for columns in iter_table_predictions(export_dir, path, chunk_rows=int(chunk_rows), batch_size=int(batch_size)):
        for name, values in columns.items():
            out.setdefault(name, []).extend(values.tolist())
    return out


@r_interruptible
def predict_table_file_to_file(export_dir: str, path: str, out: str, chunk_rows: int = 65536,
                               batch_size: int = 1024) -> dict:
    """A table model's predictions for a .csv/.parquet file, read and written chunk by chunk into
    `out` (atomically); {path, rows, chunks, format}."""
    from tpuestimator.tables.predict import predict_table_to_file

    return predict_table_to_file(export_dir, path, out, chunk_rows=int(chunk_rows), batch_size=int(batch_size))
