"""Reading writer sources into typed columns: arrays, .npz, CSV, data frames, image folders.

R data frames arrive through reticulate as pandas data frames (factors as pandas
Categoricals, whose categories become the vocabulary).
"""
from __future__ import annotations

import csv
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tpuestimator.data import encode
from tpuestimator.errors import DataError

log = logging.getLogger(__name__)
_LABEL_NAMES = ("label", "labels", "y")


def image_folder_items(folder: str) -> list[tuple[str, str]]:
    """(image path, class name) for each JPEG/PNG under `folder/<class>/`, sorted.

    Raises:
      DataError: when the folder is missing, has no class subfolders, or a class is empty.
    """
    if not os.path.isdir(folder):
        raise DataError(f"{folder}: the image folder does not exist. Give a folder with one subfolder of "
                        "JPEG/PNG images per class.", path=folder)
    classes = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)) and not d.startswith("."))
    if not classes:
        raise DataError(f"{folder}: no class subfolders. Put the images of each class in its own subfolder "
                        "(e.g. cats/ and dogs/).", path=folder)
    items = []
    for cls in classes:
        sub = os.path.join(folder, cls)
        names = sorted(os.listdir(sub))
        images = [n for n in names if encode.is_image_file(n) and not n.startswith(".")]
        skipped = [n for n in names if n not in images and not n.startswith(".")]
        if skipped:
            log.warning("%s: ignoring %d non-image file(s), e.g. %s", sub, len(skipped), skipped[0])
        if not images:
            raise DataError(f"{sub}: class {cls!r} has no JPEG or PNG images. Add images or remove the folder.",
                            path=sub)
        items.extend((os.path.join(sub, n), cls) for n in images)
    return items


def _is_frame(obj: Any) -> bool:
    return hasattr(obj, "columns") and hasattr(obj, "to_numpy") and hasattr(obj, "iloc")


def columns_from_source(source: Any, *, labels: Sequence | None = None, label: str | None = None,
                        features: Mapping[str, Mapping[str, Any]] | None = None,
                        feature_name: str = "x") -> tuple[dict[str, Any], str | None, str]:
    """Reads a non-folder source into columns of equal length.

    Returns:
      (columns name -> array with one row per example, the label column or None, a name for messages).
    """
    features = dict(features or {})
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.exists(path):
            raise DataError(f"{path}: no such file or folder. Give an image folder, a .csv or a .npz file.", path=path)
        if path.endswith(".npz"):
            with np.load(path, allow_pickle=False) as npz:
                raw = {k: npz[k] for k in npz.files}
        elif path.endswith(".csv"):
            raw = _read_csv(path, features)
        else:
            raise DataError(f"{path}: unknown source type; give an image folder, a .csv or a .npz file, or an "
                            "MNIST-format IDX images file named like train-images-idx3-ubyte[.gz].", path=path)
        name = path
    elif _is_frame(source):
        raw = {str(c): source[c] for c in source.columns}
        name = "data frame"
    elif isinstance(source, Mapping):
        raw = dict(source)
        name = "arrays"
    else:
        raw = {feature_name: np.asarray(source)}
        name = "array"
    if labels is not None:
        key = label or "label"
        if key in raw:
            raise DataError(f"{name}: labels were given and the source already has a column {key!r}; "
                            "pass one or the other.")
        raw[key] = labels
        label = key
    if label is None:
        label = next((k for k in _LABEL_NAMES if k in raw), None)
    elif label not in raw:
        raise DataError(f"{name}: label column {label!r} not found; columns are {sorted(raw)}.", feature=label)
    cols: dict[str, Any] = {}
    for key, values in raw.items():
        if key == label:
            cols[key] = values
            continue
        cols[key] = _convert(key, values, features.get(key), name)
    lengths = {k: len(v) for k, v in cols.items()}
    if len(set(lengths.values())) > 1:
        raise DataError(f"{name}: columns have different lengths {lengths}; every feature and the labels "
                        "need one value per example.")
    if lengths and next(iter(lengths.values())) == 0:
        raise DataError(f"{name}: no rows to write.")
    unknown = sorted(set(features) - set(cols))
    if unknown:
        raise DataError(f"{name}: features {unknown} were declared but are not columns of the source "
                        f"({sorted(cols)}).", feature=unknown[0])
    return cols, label, name


def _convert(key: str, values: Any, declared: Mapping[str, Any] | None, where: str) -> np.ndarray:
    if hasattr(values, "cat"):  # pandas categorical (an R factor): its labels as strings
        values = values.astype(str)
    if hasattr(values, "to_numpy"):
        values = values.to_numpy()
    arr = np.asarray(values) if not isinstance(values, np.ndarray) else values
    dtype = (declared or {}).get("dtype")
    if dtype is None:
        if arr.dtype.kind in "OUS":
            dtype = _infer_object(arr)
        elif arr.dtype.kind == "f":
            dtype = "float32"
        elif arr.dtype.kind in "iub":
            dtype = "int64" if arr.dtype != np.uint8 or arr.ndim < 3 else None
        else:
            raise DataError(f"{where}: column {key!r} has dtype {arr.dtype}; convert it to numbers or strings.",
                            feature=key)
    if dtype is None:
        out = arr
    elif dtype == "string":
        out = np.array([str(v) if not isinstance(v, bytes) else v for v in arr.reshape(-1)], dtype=object).reshape(arr.shape)
    else:
        target = np.float32 if dtype == "float32" else np.int64
        try:
            out = arr.astype(target)
        except (TypeError, ValueError):
            out = None
        if out is None or (dtype == "int64" and arr.dtype.kind == "f" and not np.all(np.equal(np.mod(arr, 1), 0))):
            flat = arr.reshape(len(arr), -1) if arr.ndim > 1 else arr.reshape(-1, 1)
            for i, row in enumerate(flat):
                for v in row:
                    try:
                        f = float(v)
                    except (TypeError, ValueError):
                        f = None
                    if f is None or (dtype == "int64" and not float(f).is_integer()):
                        raise DataError(f"{where}: column {key!r} row {i} holds {v!r}, which is not "
                                        f"{'a number' if dtype == 'float32' else 'an integer'} but the column is "
                                        f"declared {dtype}. Fix the value, drop the row, or declare the column "
                                        f"{{dtype: string}}.", path=where if os.path.exists(str(where)) else None,
                                        record=i, feature=key)
            raise DataError(f"{where}: column {key!r} cannot be converted to {dtype}.", feature=key)
    shape = (declared or {}).get("shape")
    if shape:
        per_row = int(np.prod(out.shape[1:])) if out.ndim > 1 else 1
        if per_row != int(np.prod(shape)):
            raise DataError(f"{where}: column {key!r} has {per_row} value(s) per row; the declared shape {list(shape)} "
                            f"needs {int(np.prod(shape))}.", feature=key)
        out = out.reshape([len(out)] + list(shape))
    return out


def _infer_object(arr: np.ndarray) -> str:
    vals = arr.reshape(-1)
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in vals):
        return "int64"
    if all(isinstance(v, (int, float, np.integer, np.floating)) for v in vals):
        return "float32"
    return "string"


def _read_csv(path: str, declared: Mapping[str, Mapping[str, Any]]) -> dict[str, np.ndarray]:
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            raise DataError(f"{path}: the CSV file is empty; it needs a header row and one row per example.",
                            path=path) from None
        rows = [r for r in reader if r]
    if not rows:
        raise DataError(f"{path}: the CSV file has a header but no rows.", path=path)
    out = {}
    for j, col in enumerate(header):
        values = []
        for i, r in enumerate(rows):
            if len(r) != len(header):
                raise DataError(f"{path}: row {i + 1} has {len(r)} fields; the header has {len(header)}. "
                                "Fix the row (quote fields that contain commas).", path=path, record=i)
            values.append(r[j])
        dtype = (declared.get(col) or {}).get("dtype")
        if dtype in ("float32", "int64"):
            out[col] = _parse_numbers(path, col, values, dtype)
        elif dtype == "string":
            out[col] = np.array(values, dtype=object)
        else:
            out[col] = _infer_csv(values)
    return out


def _parse_numbers(path: str, col: str, values: list[str], dtype: str) -> np.ndarray:
    parsed = []
    for i, v in enumerate(values):
        try:
            f = float(v)
            if dtype == "int64" and not f.is_integer():
                raise ValueError
        except ValueError:
            raise DataError(f"{path}: column {col!r} row {i + 1} holds {v!r}, which is not "
                            f"{'a number' if dtype == 'float32' else 'an integer'} but the column is declared "
                            f"{dtype}. Fix the value, drop the row, or declare the column {{dtype: string}}.",
                            path=path, record=i, feature=col) from None
        parsed.append(f)
    return np.asarray(parsed, np.float32 if dtype == "float32" else np.int64)


def _infer_csv(values: list[str]) -> np.ndarray:
    try:
        ints = [int(v) for v in values]
        return np.asarray(ints, np.int64)
    except ValueError:
        pass
    try:
        return np.asarray([float(v) for v in values], np.float32)
    except ValueError:
        return np.array(values, dtype=object)


def label_ids(values: Any, vocabulary: Sequence[str] | None, *, where: str) -> tuple[np.ndarray, list[str]]:
    """Label values -> (int ids from 0, vocabulary). Strings / factors map through the vocabulary.

    Raises:
      DataError: for negative or fractional ids, missing labels, or names not in the vocabulary.
    """
    if hasattr(values, "cat"):  # pandas categorical (R factor)
        cats = [str(c) for c in values.cat.categories]
        codes = np.asarray(values.cat.codes)
        if (codes < 0).any():
            i = int(np.flatnonzero(codes < 0)[0])
            raise DataError(f"{where}: row {i} has no label (NA). Drop or label the row.", record=i)
        if vocabulary is None:
            return codes.astype(np.int64), cats
        values = np.asarray([cats[c] for c in codes], dtype=object)
    if hasattr(values, "to_numpy"):
        values = values.to_numpy()
    arr = np.asarray(values)
    if arr.ndim != 1:
        arr = arr.reshape(len(arr), -1)
        if arr.shape[1] != 1:
            raise DataError(f"{where}: labels must be one value per example, got shape {list(np.shape(values))}.")
        arr = arr[:, 0]
    if arr.dtype.kind in "iufb" and not (arr.dtype.kind == "O"):
        if arr.dtype.kind == "f" and (np.isnan(arr).any() or not np.all(np.mod(arr, 1) == 0)):
            i = int(np.flatnonzero(np.isnan(arr) | (np.mod(np.nan_to_num(arr), 1) != 0))[0])
            raise DataError(f"{where}: row {i} holds label {arr[i]!r}; labels are integer class ids from 0 "
                            "(or class names).", record=i)
        ids = arr.astype(np.int64)
        if (ids < 0).any():
            i = int(np.flatnonzero(ids < 0)[0])
            raise DataError(f"{where}: row {i} holds label {ids[i]}; labels are class ids from 0.", record=i)
        vocab = list(vocabulary) if vocabulary is not None else [str(k) for k in range(int(ids.max()) + 1)]
        if ids.max() >= len(vocab):
            i = int(np.argmax(ids))
            raise DataError(f"{where}: row {i} holds label {ids[i]} but the vocabulary has {len(vocab)} classes.",
                            record=i)
        return ids, vocab
    names = [v.decode() if isinstance(v, bytes) else str(v) for v in arr]
    vocab = list(vocabulary) if vocabulary is not None else sorted(set(names))
    index = {c: i for i, c in enumerate(vocab)}
    for i, n in enumerate(names):
        if n not in index:
            raise DataError(f"{where}: row {i} holds label {n!r}, which is not in the vocabulary {vocab[:10]}. "
                            "Add it to the vocabulary or fix the row.", record=i)
    return np.asarray([index[n] for n in names], np.int64), vocab
