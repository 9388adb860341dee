"""Batch prediction of a table model: a data frame, or a CSV / Parquet file READ IN CHUNKS
(`pandas.read_csv(chunksize=)`, `pyarrow.parquet.ParquetFile.iter_batches`), each chunk
through the export's raw-features signature, and for `predict_table_to_file` each chunk's
predictions appended to the output file as it comes (`serving.prediction_files`: a hidden
temporary file renamed into place at the end, removed on any error). Memory holds one
chunk, whatever the size of the file.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from tpuestimator.errors import ConfigError, DataError
from tpuestimator.models.column_spec import parse_columns
from tpuestimator.models.feature_columns import check_missing, missing_mask
from tpuestimator.tables.frames import column_values, read_table

log = logging.getLogger(__name__)

CHUNK_ROWS = 65536  # rows read at a time from a file


def iter_table_chunks(source: Any, *, chunk_rows: int = CHUNK_ROWS) -> Iterator[tuple[int, Any]]:
    """(first row, pandas DataFrame of at most `chunk_rows` rows) of a data frame, dict of
    columns, or `.csv` / `.parquet` file, in order; a file is read one chunk at a time.

    Raises:
      DataError: a missing file, another suffix, or no rows.
      ConfigError: `chunk_rows` below 1.
    """
    import pandas as pd

    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
        raise ConfigError("chunk_rows", chunk_rows, "an integer >= 1 (rows read at a time)")
    if not isinstance(source, (str, os.PathLike)):
        frame, _ = read_table(source)
        for start in range(0, len(frame), chunk_rows):
            yield start, frame.iloc[start:start + chunk_rows].reset_index(drop=True)
        return
    path = os.fspath(source)
    if not os.path.isfile(path):
        raise DataError(f"{path}: no such file. Give a .csv or .parquet file (or a data frame).", path=path)
    lower = path.lower()
    if lower.endswith(".csv"):
        chunks = pd.read_csv(path, chunksize=chunk_rows)
    elif lower.endswith((".parquet", ".pq")):
        import pyarrow.parquet as pq

        chunks = (batch.to_pandas() for batch in pq.ParquetFile(path).iter_batches(batch_size=chunk_rows))
    else:
        raise DataError(f"{path}: a table is read from a .csv or .parquet file (or a data frame).", path=path)
    start = 0
    for chunk in chunks:
        if len(chunk):
            chunk.columns = [str(c) for c in chunk.columns]
            yield start, chunk
            start += len(chunk)
    if start == 0:
        raise DataError(f"{path}: the table has no rows.", path=path)


def table_inputs(frame: Any, columns: Mapping[str, Any], *, where: str = "newdata",
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
    columns = parse_columns(columns)
    stored = {name: column for name, column in columns.items() if column.stored}
    for name in stored:
        if name not in frame.columns:
            raise DataError(f"{where}: column {name!r} is missing; the model was trained on the columns "
                            f"{sorted(stored)}. Add it (values may be NA where the column has a "
                            "missing-value policy).", feature=name)
    values = {name: column_values(frame[name])[0] for name in stored}
    check_missing(stored, values, where=where, first_row=first_row, retrain=True)  # every column in one error
    for name, column in stored.items():
        out[name] = _convert(name, values[name], missing_mask(values[name]), column, column.missing_default(),
                             where, first_row)
    return out


def _convert(name, values, mask, column, default, where, first_row=0) -> np.ndarray:
    dtype = column.dtype
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


def table_export(export_dir: str | os.PathLike):
    """(the loaded export, its feature columns, its class names) of a table model's export.

    Raises:
      ConfigError: the export is not a table model's.
    """
    from tpuestimator.serving.exports import open_export

    export = open_export(os.fspath(export_dir))
    columns = export.info.table.feature_columns if export.info.table is not None else {}
    if not columns:
        raise ConfigError("export_dir", export.path, "the export of a model trained on a table (written with "
                          "write_table / `tpuestimator data write --label`)")
    return (export, parse_columns(columns, where="the export's feature_columns"),
            list(export.info.class_names))


def iter_table_predictions(export_dir: str | os.PathLike, source: Any, *, chunk_rows: int = CHUNK_ROWS,
                           batch_size: int = 1024, with_rows: bool = False) -> Iterator[dict[str, np.ndarray]]:
    """Prediction columns per chunk of `source` (`iter_table_chunks`): `prediction` (regression)
    or `class`, `class_id` and `prob_<class>`; with `with_rows`, first `source` (the file, or
    "") and `index` (the row's number in the table, from 0).

    Raises:
      ConfigError: not a table model's export. DataError: see `table_inputs` (its
        rows are the table's).
    """
    from tpuestimator.core.signatures import FEATURES_SIGNATURE
    from tpuestimator.serving.batch_predict import PredictionBatch
    from tpuestimator.serving.prediction_files import prediction_columns

    export, columns, class_names = table_export(export_dir)
    name = os.fspath(source) if isinstance(source, (str, os.PathLike)) else ""
    for first, chunk in iter_table_chunks(source, chunk_rows=chunk_rows):
        inputs = table_inputs(chunk, columns, first_row=first)  # by column name; `export.run` maps them
        out: dict[str, list] = {}
        for start in range(0, len(chunk), batch_size):
            batch = {k: v[start:start + batch_size] for k, v in inputs.items()}
            rows = len(next(iter(batch.values())))
            predicted = PredictionBatch(source=np.full(rows, name, dtype=object),
                                        index=np.arange(first + start, first + start + rows),
                                        outputs=export.run(FEATURES_SIGNATURE, batch))
            for key, values in prediction_columns(predicted, class_names).items():
                if with_rows or key not in ("source", "index"):
                    out.setdefault(key, []).append(values)
        yield {k: np.concatenate(v) for k, v in out.items()}


def predict_table_to_file(export_dir: str | os.PathLike, source: Any, out: str | os.PathLike, *,
                          chunk_rows: int = CHUNK_ROWS, batch_size: int = 1024,
                          progress: Callable[[int], None] | None = None) -> dict:
    """Predicts a table (a `.csv` / `.parquet` file read chunk by chunk, or a data frame) into a
    `.csv` or `.parquet` file, one chunk at a time, atomically: columns `source`, `index`, then
    `prediction` or `class_id`, `class`, `prob_<class>`.

    Returns:
      {"path", "rows", "chunks" (how many chunks were read), "format"}.

    Raises:
      ConfigError / DataError: as `iter_table_predictions`; nothing is left under `out`.
    """
    from tpuestimator.serving.prediction_files import PredictionFileWriter

    writer = PredictionFileWriter(out)  # checks the suffix (and pyarrow) before loading the model
    chunks = 0
    with writer:
        for columns in iter_table_predictions(export_dir, source, chunk_rows=chunk_rows, batch_size=batch_size,
                                              with_rows=True):
            writer.write(columns)
            chunks += 1
            if progress is not None:
                progress(len(columns["index"]))
    log.info("wrote %d predictions (%d chunks) to %s", writer.rows, chunks, writer.path)
    return {"path": str(writer.path), "rows": writer.rows, "chunks": chunks, "format": writer.format}
