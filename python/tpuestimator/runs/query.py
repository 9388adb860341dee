"""Listing runs: `ls_runs()` (tfruns's, with its filters and order) and `latest_run()`.

The rows are `reading.run_record()`'s, their columns `tpuestimator.runs.columns`'s (the same as
R's ``tpu_ls_runs()``). "Latest" means the greatest folder name, as in tfruns.
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import tpuestimator.runs.naming as naming
from tpuestimator.runs.columns import column_types
from tpuestimator.runs.reading import run_record


def _sort_key(value: Any) -> tuple:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return (1, 0, "")
    if isinstance(value, (int, float)):
        return (0, 0, float(value))
    return (0, 1, str(value))


def _coerce_like(text: Any, like: Any) -> Any:
    """Parses a filter value given as text to the type of the column value it is compared with."""
    if not isinstance(text, str) or isinstance(like, str) or like is None:
        return text
    if isinstance(like, bool):
        return {"true": True, "t": True, "1": True, "false": False, "f": False, "0": False}.get(text.lower(), text)
    if isinstance(like, (int, float)):
        try:
            return float(text)
        except ValueError:
            return text
    return text


def _lookup(row: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    for candidate in (key, f"flag_{key}", f"eval_{key}", f"metric_{key}"):
        if candidate in row:
            return True, row[candidate]
    return False, None


def parse_filters(items: Iterable[str]) -> dict[str, str]:
    """``["model=cnn", "flag_lr=0.1"]`` -> ``{"model": "cnn", "flag_lr": "0.1"}``."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"filter {item!r} is invalid. Expected: column=value, e.g. --filter model=cnn "
                             "or --filter flag_learning_rate=0.01.")
        out[key.strip()] = value.strip()
    return out


def _matches(row: Mapping[str, Any], flt: Any) -> bool:
    if flt is None:
        return True
    if callable(flt):
        return bool(flt(row))
    if isinstance(flt, str):
        flt = parse_filters([flt])
    elif not isinstance(flt, Mapping):
        flt = parse_filters(flt)
    for key, wanted in flt.items():
        found, value = _lookup(row, key)
        if not found:
            return False
        wanted = _coerce_like(wanted, value)
        if isinstance(value, (int, float)) and isinstance(wanted, (int, float)) and not isinstance(value, bool):
            if not math.isclose(float(value), float(wanted), rel_tol=1e-9, abs_tol=1e-12):
                return False
        elif value != wanted and str(value) != str(wanted):
            return False
    return True


def ls_runs(runs_dir: str | os.PathLike = "runs", latest_n: int | None = None,
            order: str | Sequence[str] | None = "run_dir", decreasing: bool = True,
            filter: Mapping[str, Any] | Sequence[str] | str | Callable[[dict], bool] | None = None,  # noqa: A002
            ) -> list[dict[str, Any]]:
    """Lists the runs of a runs folder, like tfruns's ``ls_runs()``.

    Args:
      runs_dir: the runs folder.
      latest_n: keep only the n latest runs (greatest folder names), before filtering.
      order: column(s) to sort by; default ``run_dir`` (start order). Missing values last.
      decreasing: newest / largest first (tfruns's default).
      filter: ``{column: value}`` (a key also matches ``flag_<key>``, ``eval_<key>``,
        ``metric_<key>``; text values are parsed to the column's type), ``"k=v"`` strings, or
        a callable taking a row.

    Returns:
      One dict per run; see the module docstring for the columns.
    """
    dirs = naming.list_run_dirs(runs_dir)
    if latest_n is not None:
        dirs = dirs[-int(latest_n):] if latest_n > 0 else []
    rows = [run_record(d, display_dir=os.path.join(str(runs_dir), d.name)) for d in dirs]
    rows = [r for r in rows if _matches(r, filter)]
    if order:
        keys = [order] if isinstance(order, str) else list(order)
        for key in reversed(keys):
            present = [r for r in rows if _lookup(r, key)[1] is not None]
            missing = [r for r in rows if _lookup(r, key)[1] is None]
            present.sort(key=lambda r: _sort_key(_lookup(r, key)[1]), reverse=decreasing)
            rows = present + missing
    # Every row has every column (None where a run has no value: R's NA), in one order.
    columns = list(column_types(rows))
    return [{c: row.get(c) for c in columns} for row in rows]


def latest_run(runs_dir: str | os.PathLike = "runs") -> dict[str, Any] | None:
    """The `ls_runs()` row of the run with the greatest folder name, or None when there is none."""
    rows = ls_runs(runs_dir, latest_n=1)
    return rows[0] if rows else None
