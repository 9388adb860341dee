"""Tables in: a pandas DataFrame (R data frames arrive as one through reticulate), a CSV or
Parquet file, or a dict of columns, read into a DataFrame; the label column checked and
turned into what the records store (class ids, or float32 numbers for regression).
"""
from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tpuestimator.errors import DataError
from tpuestimator.models.feature_columns import argument_text, current_syntax, missing_mask

log = logging.getLogger(__name__)

TASKS = ("classification", "regression")


def read_table(source: Any):
    """(pandas DataFrame, a name for messages) of a DataFrame, a `.csv` / `.parquet` path or a dict of columns.

    Raises:
      DataError: a missing file, another suffix, or no rows.
    """
    import pandas as pd

    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise DataError(f"{path}: no such file. Give a .csv or .parquet file (or a data frame).", path=path)
        if path.lower().endswith(".csv"):
            frame = pd.read_csv(path)
        elif path.lower().endswith((".parquet", ".pq")):
            frame = pd.read_parquet(path)
        else:
            raise DataError(f"{path}: a table is read from a .csv or .parquet file (or a data frame).", path=path)
        name = path
    elif hasattr(source, "columns") and hasattr(source, "iloc"):
        frame, name = source, "data frame"
    elif isinstance(source, Mapping):
        frame, name = pd.DataFrame({str(k): np.asarray(v) if not hasattr(v, "cat") else v
                                    for k, v in source.items()}), "columns"
    else:
        raise DataError(f"a table is a data frame, a .csv / .parquet path or a dict of columns; got "
                        f"{type(source).__name__}.")
    if len(frame) == 0:
        raise DataError(f"{name}: the table has no rows.")
    frame = frame.copy()
    frame.columns = [str(c) for c in frame.columns]
    for column in frame.columns:
        series = frame[column]
        converted = _dates_as_numbers(series, column, name)
        if converted is not series:
            frame[column] = converted
    return frame, name


def _dates_as_numbers(series, column: str, name: str):
    """A date-time column as seconds since 1970-01-01 UTC (float64; a time zone's offset applied),
    other columns as they are.

    Raises:
      DataError: a column of Python `date` / `datetime` objects (no date-time dtype), naming the
        column and the conversion, without its values.
    """
    import datetime

    import pandas as pd

    if pd.api.types.is_datetime64_any_dtype(series.dtype):
        utc = series.dt.tz_convert("UTC").dt.tz_localize(None) if series.dt.tz is not None else series
        seconds = (utc - pd.Timestamp("1970-01-01")).dt.total_seconds()
        log.info("%s: column %r holds dates and times: the model reads them as seconds since 1970-01-01 UTC (a "
                 "number); give days or another unit as a number column to choose.", name, column)
        return seconds.astype(np.float64)
    if series.dtype == object:
        first = next((v for v in series if v is not None and not (isinstance(v, float) and np.isnan(v))), None)
        if isinstance(first, (datetime.date, datetime.time, pd.Timedelta, datetime.timedelta)):
            raise DataError(f"{name}: column {column!r} holds {type(first).__name__} objects, which a model cannot "
                            f"read. Convert it to a number (e.g. days since 1970-01-01), or to a date-time column "
                            f"(pandas.to_datetime(frame[{column!r}])), which is read as seconds since 1970-01-01.",
                            feature=column)
    return series


def column_values(series) -> tuple[np.ndarray, list[str] | None]:
    """(values as a 1-D numpy array, factor levels or None): ints with NA become floats with NaN,
    bools stay bools, strings / factors become objects (None where missing)."""
    import pandas as pd

    if isinstance(series.dtype, pd.CategoricalDtype):
        levels = [str(c) for c in series.cat.categories]
        values = np.array([None if pd.isna(v) else str(v) for v in series], dtype=object)
        return values, levels
    if pd.api.types.is_bool_dtype(series.dtype):
        if series.isna().any():
            return np.array([None if pd.isna(v) else bool(v) for v in series], dtype=object), None
        return series.to_numpy(dtype=bool), None
    if pd.api.types.is_numeric_dtype(series.dtype):
        return series.to_numpy(dtype=np.float64, na_value=np.nan) if series.isna().any() or \
            pd.api.types.is_float_dtype(series.dtype) else series.to_numpy(), None
    values = series.to_numpy(dtype=object)
    values = np.array([None if (v is None or (not isinstance(v, str) and pd.isna(v))) else v for v in values],
                      dtype=object)
    if all(isinstance(v, (bool, np.bool_)) for v in values if v is not None):  # logical with NA
        return values, None
    return values, None


# The task from the label (`task_from_label`): an integer label is a class label when it has at
# most this many distinct values, and at most half as many as the table has rows; more (a count, a
# price in whole units) make it a regression.
MAX_INFERRED_CLASSES = 20


def task_from_label(values: np.ndarray, levels: list[str] | None) -> tuple[str, str]:
    """(task, why) of a label column when no task is given: the rule docs/tables.md states.

    - factors, strings and logicals: classification;
    - integers: classification with at most `MAX_INFERRED_CLASSES` distinct values and at most
      half as many distinct values as rows (each class seen twice on average), else regression;
    - other numbers: regression, unless all are whole numbers with at most 2 distinct values.
    """
    if levels is not None:
        return "classification", "a factor"
    if values.dtype.kind in "OUSb":
        return "classification", "logical" if values.dtype.kind == "b" else "text"
    present = values[~np.isnan(values)] if values.dtype.kind == "f" else values
    distinct = len(np.unique(present))
    if values.dtype.kind in "iu":
        if distinct <= 2:
            return "classification", f"integers with {distinct} distinct values"
        if distinct > MAX_INFERRED_CLASSES:
            return "regression", f"integers with {distinct} distinct values, more than {MAX_INFERRED_CLASSES}"
        if 2 * distinct > len(values):
            return "regression", (f"integers with {distinct} distinct values in {len(values)} rows, more than half "
                                  "as many as rows")
        return "classification", (f"integers with {distinct} distinct values (at most {MAX_INFERRED_CLASSES}, "
                                  "each seen twice on average)")
    if present.size and np.all(np.mod(present, 1) == 0) and distinct <= 2:
        return "classification", f"whole numbers with {distinct} distinct values"
    return "regression", "numbers"


def infer_task(values: np.ndarray, levels: list[str] | None) -> str:
    """The task of a label column when none is given (`task_from_label`)."""
    return task_from_label(values, levels)[0]


def task_message(label: str, task: str, why: str, syntax: str | None = None) -> str:
    """The line telling the user which task the label chose, why, and how to choose the other
    (``task="regression"``, in `syntax`: default `current_syntax()`)."""
    other = "regression" if task == "classification" else "classification"
    return (f"label {label!r} holds {why}: training a {'classifier' if task == 'classification' else 'regressor'} "
            f"({task}); pass {argument_text('task', other, syntax)} for a "
            f"{'regressor' if other == 'regression' else 'classifier'}.")


def label_column(frame, label: str | None, name: str, task: str | None):
    """(stored labels, vocabulary or None, task) of the label column, checked.

    Regression labels: float32. Classification labels: int64 ids from 0 into the vocabulary
    (factor levels in their order, else sorted values).

    Raises:
      DataError: the label column is missing, has missing values, is not numeric for
        regression, or holds one class.
    """
    if not label:
        how = {"r": 'label = "<column>"', "cli": "--label <column>"}.get(current_syntax(), 'label="<column>"')
        raise DataError(f"{name}: name the label column ({how}), one of {list(frame.columns)}.")
    if label not in frame.columns:
        raise DataError(f"{name}: label column {label!r} not found; the columns are {list(frame.columns)}. "
                        "Pass the name of the column to predict.", feature=label)
    if task is not None and task not in TASKS:
        raise DataError(f"{argument_text('task', task)}: use {argument_text('task', 'classification')} or "
                        f"{argument_text('task', 'regression')} (or leave it out to infer it from the label column).")
    values, levels = column_values(frame[label])
    mask = missing_mask(values) if values.dtype.kind in "fO" else np.zeros(len(values), bool)
    if mask.any():
        rows = np.flatnonzero(mask)
        raise DataError(f"{name}: label column {label!r} has {int(mask.sum())} missing value(s) (NA), e.g. row "
                        f"{int(rows[0]) + 1}. Drop those rows: a label cannot be imputed.", feature=label,
                        record=int(rows[0]))
    if task is None:
        task, why = task_from_label(values, levels)
        log.info("%s", task_message(label, task, why))
    if task == "regression":
        if levels is not None or values.dtype.kind in "OUS":
            bad = next((i for i, v in enumerate(values) if not _is_number(v)), 0)
            raise DataError(f"{name}: label column {label!r} holds {values[bad]!r} (row {bad + 1}), which is not a "
                            "number; a regression label must be numeric. Convert the column to numbers, or train "
                            f"a classifier ({argument_text('task', 'classification')}).", feature=label, record=bad)
        return values.astype(np.float32), None, task
    if levels is not None:
        vocab = list(levels)
        index = {v: i for i, v in enumerate(vocab)}
        ids = np.array([index[str(v)] for v in values], np.int64)
    else:
        keys = [_label_text(v) for v in values]
        vocab = sorted(set(keys), key=lambda k: (_sort_key(k), k))
        index = {v: i for i, v in enumerate(vocab)}
        ids = np.array([index[k] for k in keys], np.int64)
    present = sorted({int(i) for i in ids})
    if len(present) < 2:
        raise DataError(f"{name}: label column {label!r} holds one class only ({vocab[present[0]]!r}); a classifier "
                        "needs at least two. Add rows of other classes, or train a regressor "
                        f"({argument_text('task', 'regression')}) if the label is a number.", feature=label)
    return ids, vocab, task


def _is_number(v) -> bool:
    try:
        float(v)
        return not isinstance(v, (bool, np.bool_))
    except (TypeError, ValueError):
        return False


def _label_text(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "TRUE" if v else "FALSE"
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    return str(v)


def _sort_key(k: str):
    try:
        return (0, float(k))
    except ValueError:
        return (1, 0.0)


def stratify_ids(ids: Sequence[int] | None, task: str):
    return list(ids) if task == "classification" else None
