"""Feature columns of a table: what each column is and how the model receives it.

A feature column is a JSON dict (written into the manifest's `feature_columns`, editable there,
overridable per column in the config's `data.feature_columns`):

- `{"type": "numeric", "dtype": "float32", "mean": m, "variance": v, "normalize": true}`
- `{"type": "bucketized", "dtype": "float32", "boundaries": [...]}`
- `{"type": "categorical", "dtype": "string"|"int64", "vocabulary": [...], "oov_buckets": 1}`
- `{"type": "hashed", "dtype": "string"|"int64", "buckets": n}`
- `{"type": "identity", "dtype": "int64", "buckets": n}` (values 0..n-1; others go to one extra bucket)
- `{"type": "crossed", "columns": [a, b], "buckets": n}` (a hashed cross of two or more
  non-numeric columns; no column of its own in the records)

Every non-numeric column has an `encoding` (`one_hot` or `embedding`, with `embedding_dim`),
and every column a `missing` policy: `error` (the default: a missing value is an error naming
the column and the rows), `mean` or `zero` (numeric), `oov` (categorical: the missing value
goes to the out-of-vocabulary bucket). Wide-and-deep models read `part` (`wide`, `deep`, `both`).

Nothing here imports TensorFlow; statistics come from the TRAINING split only.
"""
from __future__ import annotations

import copy
import keyword
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tpuestimator.errors import ConfigError, DataError, current_syntax
from tpuestimator.models.column_spec import OOV_BUCKETS, ColumnSpec, parse_columns

TYPES = ("numeric", "bucketized", "categorical", "hashed", "identity", "crossed")
INDEX_TYPES = ("bucketized", "categorical", "hashed", "identity", "crossed")
ENCODINGS = ("one_hot", "embedding")
MISSING = ("error", "mean", "zero", "oov")
PARTS = ("wide", "deep", "both")
# Inference: a string column with more distinct training values than this is hashed into
# HASH_BUCKETS buckets instead of getting a vocabulary; columns of at most ONE_HOT_MAX indices
# are one-hot, larger ones embedded.
MAX_VOCABULARY = 1000
HASH_BUCKETS = 1024
ONE_HOT_MAX = 16


def embedding_dim(cardinality: int) -> int:
    """A default embedding width: grows with the fourth root of the cardinality, 2..32."""
    return int(min(32, max(2, round(2 * cardinality ** 0.25))))


def cardinality(column: Mapping[str, Any] | ColumnSpec) -> int:
    """The number of distinct indices a non-numeric column (a `ColumnSpec` or its dict) produces."""
    return ColumnSpec.parse("column", column).cardinality


def _with_encoding(column: dict) -> dict:
    if column["type"] in INDEX_TYPES:
        n = cardinality(column)
        column.setdefault("encoding", "one_hot" if n <= ONE_HOT_MAX else "embedding")
        if column["encoding"] == "embedding":
            column.setdefault("embedding_dim", embedding_dim(n))
        column.setdefault("part", "wide" if column["type"] == "crossed" else "both")
    else:
        column.setdefault("part", "deep")
    column.setdefault("missing", "error")
    return column


def infer_column(name: str, values: np.ndarray, *, categories: Sequence[str] | None = None,
                 kind: str | None = None, buckets: int | None = None) -> dict:
    """The feature column of one table column from its TRAINING values (NaN / None = missing).

    Args:
      values: a 1-D array: floats (numeric), ints, bools or strings (categorical).
      categories: the levels of an R factor / pandas Categorical, in their order.
      kind: a type the user declared (its vocabulary, boundaries or buckets come from the values).
      buckets: the number of buckets of a declared `bucketized` (quantiles), `hashed` or `identity` column.
    """
    present = _present(values)
    textual = categories is not None or values.dtype.kind in "OUSb"
    if kind is None:
        if values.dtype.kind == "b":
            kind = "identity"
        elif textual:
            kind = "categorical"
        else:
            kind = "numeric"
    if kind == "numeric":
        if textual:
            raise ConfigError(f"feature_columns.{name}.type", "numeric", "categorical, hashed or identity: the "
                              f"column holds text such as {str(present[0]) if present.size else ''!r}")
        numbers = present.astype(np.float64)
        mean = float(numbers.mean()) if numbers.size else 0.0
        variance = float(numbers.var()) if numbers.size else 1.0
        return _with_encoding({"type": "numeric", "dtype": "float32", "mean": mean,
                               "variance": variance if variance > 0 else 1.0, "normalize": True})
    integral = not textual and bool(np.all(np.mod(present.astype(np.float64), 1) == 0))
    if kind == "bucketized":
        if textual:
            raise ConfigError(f"feature_columns.{name}.type", "bucketized", "categorical or hashed for a text column")
        n = int(buckets or 4)
        bounds = sorted({float(b) for b in np.quantile(present.astype(np.float64), np.linspace(0, 1, n + 1)[1:-1])})
        return _with_encoding({"type": "bucketized", "dtype": "float32", "boundaries": bounds or [0.0]})
    if kind == "identity":
        if textual and values.dtype.kind != "b":
            raise ConfigError(f"feature_columns.{name}.type", "identity", "categorical or hashed for a text column")
        top = int(present.astype(np.int64).max()) + 1 if present.size else 1
        return _with_encoding({"type": "identity", "dtype": "int64", "buckets": int(buckets or max(top, 2))})
    dtype = "int64" if integral else "string"
    if kind == "hashed":
        return _with_encoding({"type": "hashed", "dtype": dtype, "buckets": int(buckets or HASH_BUCKETS)})
    if kind != "categorical":
        raise ConfigError(f"feature_columns.{name}.type", kind, " | ".join(t for t in TYPES if t != "crossed"))
    as_key = (lambda v: int(v)) if integral else str
    seen = Counter(as_key(v) for v in present)
    if categories is not None:
        vocab = [str(c) for c in categories if str(c) in seen]
    else:  # most frequent first (ties by value): the order a user reads best
        vocab = [v for v, _ in sorted(seen.items(), key=lambda kv: (-kv[1], kv[0]))]
    if len(vocab) > MAX_VOCABULARY:
        return _with_encoding({"type": "hashed", "dtype": dtype, "buckets": HASH_BUCKETS})
    return _with_encoding({"type": "categorical", "dtype": dtype, "vocabulary": vocab, "oov_buckets": OOV_BUCKETS})


def _present(values: np.ndarray) -> np.ndarray:
    return values[~missing_mask(values)]


def missing_mask(values: np.ndarray) -> np.ndarray:
    """True where a value is missing: NaN, None, pandas NA."""
    if values.dtype.kind == "f":
        return np.isnan(values)
    if values.dtype.kind == "O":
        return np.array([v is None or (isinstance(v, float) and math.isnan(v)) or str(v) in ("<NA>", "nan")
                         and not isinstance(v, str) for v in values], dtype=bool)
    return np.zeros(len(values), dtype=bool)


def apply_overrides(columns: Mapping[str, dict], overrides: Mapping[str, Any] | None, *,
                    where: str = "data.feature_columns") -> dict[str, dict]:
    """The inferred columns with per-column overrides merged in (a field set wins; `null` removes
    a column). New names must be `crossed` columns. Encoding defaults follow a changed type.

    Raises:
      ConfigError: naming the column and field for an unknown column, type, encoding or policy.
    """
    out = copy.deepcopy(dict(columns))
    for name, override in (overrides or {}).items():
        if override is None:
            out.pop(name, None)
            continue
        if not isinstance(override, Mapping):
            raise ConfigError(f"{where}.{name}", override,
                              f"a mapping of column fields, e.g. {column_spec_text('categorical')}")
        if name not in out and override.get("type") != "crossed":
            raise ConfigError(f"{where}.{name}", dict(override), f"a column of the table ({', '.join(sorted(out))}) "
                              f"or a new {column_spec_text('crossed')}")
        base = dict(out.get(name, {}))
        if "type" in override and override["type"] != base.get("type"):
            base = {k: v for k, v in base.items() if k in ("dtype", "missing", "mean", "variance")}
            if override["type"] in INDEX_TYPES:
                base.pop("mean", None)
                base.pop("variance", None)
        if "encoding" in override and override["encoding"] == "one_hot":
            base.pop("embedding_dim", None)
        base.update(dict(override))
        out[name] = base
    for name, column in out.items():
        out[name] = validate_column(name, _with_encoding(dict(column)), out, where=where)
    return out


def validate_column(name: str, column: dict, columns: Mapping[str, dict], *,
                    where: str = "feature_columns") -> dict:
    """Checks one column's fields; returns it.

    Raises:
      ConfigError: naming `<where>.<name>.<field>`, the value and what is allowed.
    """
    field = f"{where}.{name}"
    kind = column.get("type")
    if kind not in TYPES:
        raise ConfigError(f"{field}.type", kind, " | ".join(TYPES))
    if column.get("missing") not in MISSING:
        raise ConfigError(f"{field}.missing", column.get("missing"), " | ".join(MISSING))
    if kind == "numeric" and column["missing"] == "oov":
        raise ConfigError(f"{field}.missing", "oov", "error | mean | zero for a numeric column")
    if kind in INDEX_TYPES and column["missing"] in ("mean",) and kind != "bucketized":
        raise ConfigError(f"{field}.missing", column["missing"], "error | oov for a categorical column")
    if column.get("part", "both") not in PARTS:
        raise ConfigError(f"{field}.part", column.get("part"), " | ".join(PARTS))
    if kind == "numeric":
        column.setdefault("normalize", True)
        column.setdefault("mean", 0.0)
        column.setdefault("variance", 1.0)
        if column["variance"] <= 0:
            raise ConfigError(f"{field}.variance", column["variance"], "a positive number")
    if kind == "bucketized":
        b = column.get("boundaries")
        if not isinstance(b, list) or not b or sorted(b) != b:
            raise ConfigError(f"{field}.boundaries", b, "a non-empty increasing list of numbers")
    if kind == "categorical" and not isinstance(column.get("vocabulary"), list):
        raise ConfigError(f"{field}.vocabulary", column.get("vocabulary"), "a list of values")
    if kind in ("hashed", "identity", "crossed"):
        if not isinstance(column.get("buckets"), int) or column["buckets"] < 1:
            raise ConfigError(f"{field}.buckets", column.get("buckets"), "a positive integer")
    if kind == "crossed":
        crossed = column.get("columns")
        if not isinstance(crossed, list) or len(crossed) < 2:
            raise ConfigError(f"{field}.columns", crossed, "a list of two or more column names")
        for c in crossed:
            if c not in columns or columns[c]["type"] in ("numeric", "crossed"):
                raise ConfigError(f"{field}.columns", crossed, "names of categorical, hashed, identity or "
                                  "bucketized columns of the table")
    if kind in INDEX_TYPES:
        if column.get("encoding") not in ENCODINGS:
            raise ConfigError(f"{field}.encoding", column.get("encoding"), " | ".join(ENCODINGS))
        if column["encoding"] == "embedding" and (not isinstance(column.get("embedding_dim"), int)
                                                  or column["embedding_dim"] < 1):
            raise ConfigError(f"{field}.embedding_dim", column.get("embedding_dim"), "a positive integer")
    return column


def input_name(column: str) -> str:
    """A column's name as the model's input and in its layers' names: a valid, non-keyword Python
    identifier, in lower case, every character but letters and digits replaced by `_`, `arg_` in
    front of a leading non-letter and `_` after a Python keyword (`Class` -> `class_`). Keras
    refuses `/` in names, TensorFlow renames a signature's inputs the same way (`Petal.Length` ->
    `petal_length`) and `tf.saved_model.save` refuses a keyword as an input (a signature's inputs
    are a Python function's parameters), so the export's `features` signature takes these names;
    the records, the manifest and `predict_table` keep the column's own name."""
    swapped = "".join(ch if ch.isascii() and ch.isalnum() else "_" for ch in str(column))
    name = (swapped if swapped[:1].isalpha() else "arg_" + swapped).lower()
    return name + "_" if keyword.iskeyword(name) else name


def check_input_names(names: Sequence[str], *, where: str) -> None:
    """Refuses two columns whose input names (`input_name`) are the same.

    Raises:
      DataError: naming both columns and the fix.
    """
    seen: dict[str, str] = {}
    for name in names:
        key = input_name(name)
        if key in seen:
            raise DataError(f"{where}: columns {seen[key]!r} and {name!r} both become the model input {key!r} (a "
                            "model's input names keep letters and digits only, in lower case, with `_` after a "
                            "Python keyword). Rename one of them.",
                            feature=name)
        seen[key] = name


def record_columns(columns: Mapping[str, Any]) -> dict[str, Any]:
    """The columns stored in the records (all but crosses), `ColumnSpec`s or their dicts."""
    return {k: v for k, v in columns.items() if ColumnSpec.parse(k, v).stored}


def missing_default(column: Mapping[str, Any] | ColumnSpec):
    """The value a missing entry takes under the column's policy (None: the policy is `error`)."""
    return ColumnSpec.parse("column", column).missing_default()


def check_missing(columns: Mapping[str, Any], values: Mapping[str, np.ndarray], *, where: str,
                  first_row: int = 0, retrain: bool = False) -> None:
    """Checks every column of `columns` (`ColumnSpec`s or their dicts) whose policy is `error`
    for missing values in `values` ({name: values}) and raises ONE error listing them all, so a
    table with several incomplete columns is fixed in one try.

    `first_row`: the position of `values`' first row in the whole table (a chunk's), so row
    numbers count from 1 in the whole table, as R and spreadsheets number rows. `retrain`: the
    fix is a new training (prediction from an export).

    Raises:
      DataError: with `missing_columns` ({name: {"count", "rows" (1-based, the first five),
        "numeric"}}), `feature` (the first such column) and `record` (its first row, 0-based).
    """
    found: dict[str, dict] = {}
    first_record = None
    for name, column in columns.items():
        column = ColumnSpec.parse(name, column)
        if column.missing_policy != "error" or name not in values:
            continue
        rows = np.flatnonzero(missing_mask(values[name]))
        if len(rows):
            found[name] = {"count": int(len(rows)), "rows": [first_row + int(r) + 1 for r in rows[:5]],
                           "numeric": column.type in ("numeric", "bucketized")}
            first_record = first_row + int(rows[0]) if first_record is None else first_record
    if found:
        error = DataError(missing_values_message(where, found, retrain=retrain), feature=next(iter(found)),
                          record=first_record)
        error.missing_columns = found
        error.missing_where = where
        error.missing_retrain = retrain
        raise error


_R_RESERVED = {"if", "else", "repeat", "while", "function", "for", "next", "break", "TRUE", "FALSE", "NULL",
               "Inf", "NaN", "NA", "NA_integer_", "NA_real_", "NA_character_", "in"}


def _r_name(name: str) -> str:
    """`name` as an R list name: bare when syntactic, else in backticks."""
    if re.fullmatch(r"([A-Za-z]|[.][A-Za-z._]|[.]$)[A-Za-z0-9._]*", name) and name not in _R_RESERVED:
        return name
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def argument_text(name: str, value: str, syntax: str | None = None) -> str:
    """An argument set to the string `value` as the user types it: ``task="regression"``
    (Python), ``task = "regression"`` (R), ``--task regression`` (CLI)."""
    syntax = syntax or current_syntax()
    if syntax == "r":
        return f'{name} = "{value}"'
    if syntax == "cli":
        return f"--{name.replace('_', '-')} {value}"
    return f'{name}="{value}"'


def drop_column_text(column: str, syntax: str | None = None) -> str:
    """How the user leaves a column out of the model: ``feature_columns={'x': None}`` (Python),
    ``feature_columns = list(x = NULL)`` (R); from the CLI, from the file itself."""
    syntax = syntax or current_syntax()
    if syntax == "r":
        return f"feature_columns = list({_r_name(column)} = NULL)"
    if syntax == "cli":
        return "delete it from the file"
    return f"feature_columns={{{column!r}: None}}"


def column_spec_text(kind: str, syntax: str | None = None) -> str:
    """A column's declaration as the user writes it, for a fix: ``{type: crossed, columns: [a, b],
    buckets: n}`` (a config's or Python's mapping), ``column_spec("crossed", columns = c("a", "b"),
    buckets = n)`` (R's `column_spec()`)."""
    crossed = kind == "crossed"
    if (syntax or current_syntax()) == "r":
        return f'column_spec("{kind}"' + (', columns = c("a", "b"), buckets = n' if crossed else "") + ")"
    return f"{{type: {kind}" + (", columns: [a, b], buckets: n" if crossed else "") + "}"


def missing_values_message(where: str, found: Mapping[str, Mapping[str, Any]], *, syntax: str | None = None,
                           retrain: bool = False) -> str:
    """The message of `check_missing`: every column with its count and first rows (from 1), the
    one-argument fix (``missing="mean"``) and the per-column one, in Python, R or CLI syntax
    (default: `current_syntax()`)."""
    def rows(info):
        shown = ", ".join(str(r) for r in info["rows"]) + (", ..." if info["count"] > len(info["rows"]) else "")
        return f"{info['count']} missing, row{'s' if info['count'] > 1 else ''} {shown}"

    def policy(info):
        return "mean" if info["numeric"] else "oov"

    syntax = syntax or current_syntax()
    if syntax == "r":
        listed = ", ".join(f"{name} ({rows(info)})" for name, info in found.items())
        every = 'missing = "mean"'
        each = "missing = list(" + ", ".join(f'{_r_name(n)} = "{policy(i)}"' for n, i in found.items()) + ")"
    elif syntax == "cli":
        listed = ", ".join(f"{name!r} ({rows(info)})" for name, info in found.items())
        every = "--missing mean"
        each = " ".join(f"--missing {n}={policy(i)}" for n, i in found.items())
    else:
        listed = ", ".join(f"{name!r} ({rows(info)})" for name, info in found.items())
        every = "missing='mean'"
        each = "missing={" + ", ".join(f"{n!r}: {policy(i)!r}" for n, i in found.items()) + "}"
    count = len(found)
    what = "the model was trained with no missing-value policy for it" if count == 1 else \
        "the model was trained with no missing-value policy for them"
    if not retrain:
        what = "no missing-value policy covers it" if count == 1 else "no missing-value policy covers them"
    fix = "Fill those values, or retrain" if retrain else "Drop or fill those rows, or train"
    return (f"{where}: {count} column{'s' if count > 1 else ''} with missing values (NA), and {what}: {listed}. "
            f"{fix} with {every} for all columns at once (a number column gets the training rows' mean, a "
            f"category, character or logical column the out-of-vocabulary bucket), or per column: {each} "
            "(\"mean\" or \"zero\" for numbers, \"oov\" for categories).")


def table_summary(columns: Mapping[str, Any]) -> str:
    """One line per column (`ColumnSpec`s or a manifest's dicts), for logs and the CLI."""
    lines = []
    for name, c in parse_columns(columns).items():
        detail = {"numeric": lambda c: f"mean {c.mean or 0:.4g}, variance {1 if c.variance is None else c.variance:.4g}",
                  "categorical": lambda c: f"{len(c.vocabulary)} values + {c.cardinality - len(c.vocabulary)} OOV",
                  "bucketized": lambda c: f"{len(c.boundaries) + 1} buckets",
                  "hashed": lambda c: f"{c.buckets} buckets",
                  "identity": lambda c: f"{c.buckets} ids",
                  "crossed": lambda c: f"{' x '.join(c.columns)}, {c.buckets} buckets"}[c.type](c)
        enc = f", {c.encoding}" if c.type in INDEX_TYPES else ""
        lines.append(f"{name}: {c.type} ({detail}{enc}), missing: {c.missing_policy}")
    return "\n".join(lines)
