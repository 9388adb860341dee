"""Tables in: a pandas DataFrame (R data frames arrive as one through reticulate), a CSV or
Parquet file, or a dict of columns, read into a DataFrame; the label column checked and
turned into what the records store (class ids, or float32 numbers for regression).
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tpuestimator.errors import DataError
from tpuestimator.models.feature_columns import missing_mask

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
    return frame, name


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


def infer_task(values: np.ndarray, levels: list[str] | None) -> str:
    """Classification for factors, strings, bools and integers; regression for other numbers."""
    if levels is not None or values.dtype.kind in "OUSb":
        return "classification"
    if values.dtype.kind in "iu":
        return "classification"
    present = values[~np.isnan(values)]
    if present.size and np.all(np.mod(present, 1) == 0) and len(np.unique(present)) <= 2:
        return "classification"
    return "regression"


def label_column(frame, label: str | None, name: str, task: str | None):
    """(stored labels, vocabulary or None, task) of the label column, checked.

    Regression labels: float32. Classification labels: int64 ids from 0 into the vocabulary
    (factor levels in their order, else sorted values).

    Raises:
      DataError: the label column is missing, has missing values, is not numeric for
        regression, or holds one class.
    """
    if not label:
        raise DataError(f"{name}: name the label column (label=..., --label), one of {list(frame.columns)}.")
    if label not in frame.columns:
        raise DataError(f"{name}: label column {label!r} not found; the columns are {list(frame.columns)}. "
                        "Pass the name of the column to predict.", feature=label)
    if task is not None and task not in TASKS:
        raise DataError(f"task={task!r}: use 'classification' or 'regression' (or leave it out to infer it "
                        "from the label column).")
    values, levels = column_values(frame[label])
    mask = missing_mask(values) if values.dtype.kind in "fO" else np.zeros(len(values), bool)
    if mask.any():
        rows = np.flatnonzero(mask)
        raise DataError(f"{name}: label column {label!r} has {int(mask.sum())} missing value(s) (NA), e.g. row "
                        f"{int(rows[0]) + 1}. Drop those rows: a label cannot be imputed.", feature=label,
                        record=int(rows[0]))
    task = task or infer_task(values, levels)
    if task == "regression":
        if levels is not None or values.dtype.kind in "OUS":
            bad = next((i for i, v in enumerate(values) if not _is_number(v)), 0)
            raise DataError(f"{name}: label column {label!r} holds {values[bad]!r} (row {bad + 1}), which is not a "
                            "number; a regression label must be numeric. Convert the column to numbers, or train "
                            "a classifier (task='classification').", feature=label, record=bad)
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
                        "(task='regression') if the label is a number.", feature=label)
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
