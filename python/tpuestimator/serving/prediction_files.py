"""Prediction files: CSV or Parquet written batch by batch, atomically.

`prediction_columns(batch, class_names)` turns a `batch_predict.PredictionBatch` into columns
(`source`, `index`, `class_id`, `class`, then one `prob_<class>` per class, then any other
output), `example_prediction_columns(rows, class_names)` per-example predictions (R's
``tpu_predict()`` of in-memory features); `PredictionFileWriter(path)` appends batches to a hidden temporary file next to
`path` and renames it onto `path` at `close()` (a failure removes it: never a half-written
file under the final name). Parquet needs pyarrow (the `parquet` extra); CSV is the standard
library's `csv`. Nothing here imports TensorFlow.
"""
from __future__ import annotations

import contextlib
import csv
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from tpuestimator.errors import ConfigError

FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def output_format(path: str | os.PathLike) -> str:
    """'csv' or 'parquet' from the file name's suffix.

    Raises:
      ConfigError: another suffix.
    """
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ConfigError("--out", str(path), "a file ending in .csv or .parquet")
    return FORMATS[suffix]


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def prediction_columns(batch, class_names: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """Columns of one batch: `source`, `index`, `class_id`, `class` (when the model names its
    classes), `prob_<class name>` per class (`prob_<id>` without names), then any other output
    (`<name>` for a vector, `<name>_<j>` per column of a matrix)."""
    outputs = dict(batch.outputs)
    cols: dict[str, np.ndarray] = {"source": np.asarray(batch.source, dtype=object),
                                   "index": np.asarray(batch.index, dtype=np.int64)}
    if "class_id" in outputs:
        cols["class_id"] = np.asarray(outputs.pop("class_id")).astype(np.int64).reshape(-1)
    if "class" in outputs:
        cols["class"] = np.array([_text(v) for v in np.asarray(outputs.pop("class")).reshape(-1)], dtype=object)
    probs = outputs.pop("probabilities", None)
    if probs is not None:
        probs = np.asarray(probs)
        probs = probs.reshape(len(probs), -1)
        names = list(class_names) if len(class_names) == probs.shape[1] else [str(j) for j in range(probs.shape[1])]
        for j, name in enumerate(names):
            cols[f"prob_{name}"] = probs[:, j].astype(np.float32)
    for name, value in outputs.items():
        value = np.asarray(value)
        if value.ndim <= 1:
            cols[name] = value if value.dtype.kind != "S" else np.array([_text(v) for v in value], dtype=object)
        else:
            flat = value.reshape(len(value), -1)
            for j in range(flat.shape[1]):
                cols[f"{name}_{j}"] = flat[:, j]
    return cols


# Output names that hold a class id / a class name (canned estimators', Keras's, ours).
CLASS_ID_OUTPUTS = ("classes", "class_ids", "classid", "predicted_class")
CLASS_NAME_OUTPUTS = ("class_name", "class_string")


def _flat(value) -> list:
    if value is None:
        return []
    if isinstance(value, bytes):
        return [_text(value)]
    items = np.asarray(value, dtype=object).reshape(-1).tolist() if not isinstance(value, str) else [value]
    return [_text(v) if isinstance(v, bytes) else (v.item() if hasattr(v, "item") else v) for v in items]


def example_prediction_columns(rows: Sequence[Mapping] | Mapping,
                               class_names: Sequence[str] = ()) -> dict[str, list]:
    """Per-example predictions (`serving.exports.predict`: one dict of outputs per example) as
    columns: a scalar output as ``<name>``, a vector one as ``<name>_<j>`` (``prob_<class>`` /
    ``<name>_<class>`` for a probability, logit or score vector with one value per class name);
    then the class id output named ``class_id`` (an int), the class name one ``class`` (from
    `class_names` when the model gives ids only), both first. None where an example lacks a value."""
    if isinstance(rows, Mapping):
        rows = [rows]
    if not rows:
        return {"class_id": []}
    keys = list(dict.fromkeys(k for row in rows for k in row))
    cols: dict[str, list] = {}
    for key in keys:
        values = [_flat(row.get(key)) or [None] for row in rows]
        width = max(len(v) for v in values)
        if width == 1:
            cols[key] = [v[0] for v in values]
            continue
        per_class = len(class_names) == width and any(w in key for w in ("prob", "logit", "score"))
        names = [("prob_" if "prob" in key else f"{key}_") + str(c) for c in class_names] if per_class \
            else [f"{key}_{j}" for j in range(width)]
        for j, name in enumerate(names):
            cols[name] = [v[j] if j < len(v) else None for v in values]
    renamed: dict[str, list] = {}
    for name, values in cols.items():
        name = "class_id" if name in CLASS_ID_OUTPUTS else "class" if name in CLASS_NAME_OUTPUTS else name
        renamed.setdefault(name, values)
    if "class_id" in renamed:
        renamed["class_id"] = [None if v is None else int(v) for v in renamed["class_id"]]
        if "class" not in renamed and class_names:
            renamed["class"] = [str(class_names[v]) if v is not None and 0 <= v < len(class_names) else None
                                for v in renamed["class_id"]]
    front = [n for n in ("class_id", "class") if n in renamed]
    return {n: renamed[n] for n in front + [n for n in renamed if n not in front]}


def _cell(value) -> str:
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.9g}"  # 9 significant digits round-trip a float32
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


class PredictionFileWriter:
    """Writes prediction columns batch by batch to a CSV or Parquet file, atomically.

    Use as a context manager; `write(columns)` per batch. The file appears under `path` only
    when the block ends without an error. Every batch must have the first batch's columns.

    Raises:
      ConfigError: an unknown suffix, or `.parquet` without pyarrow (names the extra).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.format = output_format(self.path)
        if self.format == "parquet":
            try:
                import pyarrow  # noqa: F401
            except ImportError as exc:
                raise ConfigError("--out", str(path), "a .csv file, or install pyarrow for Parquet: "
                                  "pip install 'tpuestimator[parquet]'") from exc
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, self._tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        os.close(fd)
        self._columns: list[str] | None = None
        self._csv_file = None
        self._csv = None
        self._parquet = None
        self.rows = 0

    def write(self, columns: Mapping[str, np.ndarray]) -> None:
        names = list(columns)
        if self._columns is None:
            self._columns = names
            self._open(columns)
        elif names != self._columns:
            raise ValueError(f"a batch with columns {names}; the file has {self._columns}")
        n = len(next(iter(columns.values())))
        if self.format == "csv":
            arrays = [columns[c].tolist() for c in names]
            self._csv.writerows([_cell(v) for v in row] for row in zip(*arrays))
        else:
            import pyarrow as pa

            self._parquet.write_table(pa.table({c: _arrow(columns[c]) for c in names}, schema=self._schema))
        self.rows += n

    def _open(self, columns: Mapping[str, np.ndarray]) -> None:
        if self.format == "csv":
            self._csv_file = open(self._tmp, "w", newline="", encoding="utf-8")  # noqa: SIM115 (closed in close())
            self._csv = csv.writer(self._csv_file)
            self._csv.writerow(list(columns))
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            self._schema = pa.table({c: _arrow(v) for c, v in columns.items()}).schema
            self._parquet = pq.ParquetWriter(self._tmp, self._schema)

    def close(self) -> Path:
        """Finishes the file and renames it onto `path`; returns `path`."""
        if self._csv_file is not None:
            self._csv_file.close()
        if self._parquet is not None:
            self._parquet.close()
        if self._columns is None:  # no rows: an empty file, still a valid one
            if self.format == "csv":
                Path(self._tmp).write_text("", encoding="utf-8")
            else:
                import pyarrow as pa
                import pyarrow.parquet as pq

                pq.write_table(pa.table({}), self._tmp)
        os.replace(self._tmp, self.path)
        return self.path

    def abort(self) -> None:
        """Removes the temporary file (the final path is left as it was)."""
        with contextlib.suppress(Exception):
            if self._csv_file is not None:
                self._csv_file.close()
            if self._parquet is not None:
                self._parquet.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._tmp)

    def __enter__(self) -> PredictionFileWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is None:
            self.close()
        else:
            self.abort()
        return False


def _arrow(values: np.ndarray):
    import pyarrow as pa

    if values.dtype == object:
        return pa.array([_text(v) for v in values], type=pa.string())
    return pa.array(values)
