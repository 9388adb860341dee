"""The columns of a runs listing: their names, types and order, R's ``tpu_ls_runs()``'s too (it
converts `tpuestimator.runs.frames.runs_columns()`, which gives these types).

The columns follow tfruns's ``ls_runs()`` (R/ls_runs.R; docs/RUN_FORMAT.md, "Reading runs"; proved by
tests/python/test_runs_columns.py and tests/testthat/test-runs-columns.R on tests/fixtures/runs/):
``run_dir``, ``eval_<m>`` (evaluation.json), ``metric_<m>`` (last non-null value of every
metrics.json array but ``epoch``, the x axis, which tfruns skips), ``flag_<f>`` (flags.json), then
`FRONT_COLUMNS` (with ``steps_completed`` or ``epochs_completed``, chosen and counted as tfruns
does: `progress_column()`), ``status`` (ours: ``completed``, ``failed``, ``running``,
``interrupted``), then the other properties sorted by name. `column_types()` gives each column's
type; `parse_property()` types a property's text.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from tpuestimator.runs.values import X_KEY  # tfruns skips it when it makes metric_<m> columns

# The column types and order (schema/run_columns.json; both test suites check them against
# tests/fixtures/runs).
_COLUMNS = json.loads(resources.files("tpuestimator.schema").joinpath("run_columns.json").read_text())
INT_PROPERTIES = tuple(_COLUMNS["integer_properties"])
# start and end are epoch seconds here (R makes them POSIXct).
FLOAT_PROPERTIES = tuple(_COLUMNS["double_properties"] + _COLUMNS["time_properties"])
BOOL_PROPERTIES = tuple(_COLUMNS["logical_properties"])
INT_COLUMNS = INT_PROPERTIES + tuple(_COLUMNS["integer_columns"])
FRONT_COLUMNS = tuple(_COLUMNS["front_columns"])
# tfruns R/ls_runs.R: valid_steps_units; get_steps_unit() takes the first one that is a property.
STEPS_UNITS = tuple(_COLUMNS["steps_units"])


def parse_property(name: str, text: str) -> Any:
    """Types a property the way tfruns does (None where R would get NA)."""
    raw, text = text, text.strip()
    if name in BOOL_PROPERTIES:
        return {"TRUE": True, "T": True, "FALSE": False, "F": False}.get(text.upper())
    if name in INT_COLUMNS:
        try:
            value = float(text)
        except ValueError:
            return None
        return int(value) if math.isfinite(value) and value.is_integer() else None
    if name in FLOAT_PROPERTIES:
        try:
            value = float(text)
        except ValueError:
            return None
        return value if math.isfinite(value) else None
    return raw.rstrip("\r\n")


def completed_rows(metrics: Any) -> int:
    """tfruns's ``<unit>_completed`` (R/ls_runs.R, run_record()): its loop over the metrics.json
    keys, ``epoch`` skipped, overwrites the count at each key, so the count is the number of
    non-null entries of the LAST array other than ``epoch`` (0 without one)."""
    count = 0
    if isinstance(metrics, dict):
        for key, values in metrics.items():
            if key == X_KEY:
                continue
            count = sum(v is not None for v in values) if isinstance(values, list) else int(values is not None)
    return count


def progress_column(props: Mapping[str, Any]) -> str:
    """``steps_completed`` when the run has a ``steps`` property, else ``epochs_completed`` when
    it has ``epochs``, else ``steps_completed`` (tfruns R/ls_runs.R: get_steps_unit())."""
    unit = next((u for u in STEPS_UNITS if u in props), STEPS_UNITS[0])
    return f"{unit}_completed"


def order_columns(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row's (or a list of column names') columns in the order both readers use."""
    names = list(row)
    by_prefix = [n for p in ("eval_", "metric_", "flag_") for n in names if n.startswith(p)]
    front = [n for n in FRONT_COLUMNS if n in row]
    head = ["run_dir"] if "run_dir" in row else []
    used = set(head) | set(by_prefix) | set(front) | {"status"}
    ordered = head + by_prefix + front + (["status"] if "status" in row else []) + \
        sorted(n for n in names if n not in used)
    return {n: row[n] for n in ordered} if isinstance(row, Mapping) else ordered


def column_type(name: str, values: Sequence[Any]) -> str:
    """The type of an `ls_runs()` column, as both readers give it: ``character``, ``integer``,
    ``double``, ``logical`` or ``time`` (R: POSIXct; Python: epoch seconds)."""
    if name in ("start", "end"):
        return "time"
    if name == "completed":
        return "logical"
    if name in INT_COLUMNS:
        return "integer"
    if name.startswith(("eval_", "metric_")) or name in ("learning_rate",):
        present = [v for v in values if v is not None]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
            return "double"
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return "logical"
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return "integer"
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return "double"
    return "character"


def column_types(rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """{column: type} of `ls_runs()` rows, in column order (the union of the rows' columns)."""
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row))
    ordered = order_columns(dict.fromkeys(names))
    return {n: column_type(n, [r.get(n) for r in rows]) for n in ordered}
