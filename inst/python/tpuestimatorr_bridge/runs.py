"""The bridge's run functions: R's run reader (`tpu_ls_runs()`, `tpu_run_info()`,
`tpu_latest_run()`), the folder a job reads for a run and the default runs folder, all
`tpuestimator.runs.frames`'s. R converts what they return and repeats none of their rules
(issue 33.4). None of them imports TensorFlow: listing runs from R does not start it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def default_runs_dir(chosen: str | None = None) -> str:
    """The runs folder R's functions default to: R's option `tfruns.runs_dir` (`chosen`) when
    set, else the core's (`tpuestimator.runs.frames.default_runs_dir`)."""
    from tpuestimator.runs.frames import default_runs_dir as _default_runs_dir

    return _default_runs_dir(chosen)


def runs_columns(runs_dir: str, latest_n: int | None = None) -> dict:
    """A runs folder's listing as {types, columns}, newest run first (`tpuestimator.runs.frames`):
    the rows of Python's `ls_runs()`, status included (its owner check: host, pid and start time)."""
    from tpuestimator.runs.frames import runs_columns as _runs_columns

    return _runs_columns(runs_dir, None if latest_n is None else int(latest_n))


def is_run_dir(path: str) -> bool:
    """Whether `path` is a run folder (`tpuestimator.runs.naming.is_run_dir`: it holds tfruns.d/)."""
    from tpuestimator.runs.naming import is_run_dir as _is_run_dir

    return _is_run_dir(path)


def run_summary(run_dir: str) -> dict | None:
    """One run as R's `tpu_run` holds it, None when `run_dir` is not a run folder."""
    from tpuestimator.runs.frames import run_summary as _run_summary

    return _run_summary(run_dir)


def latest_run_dir(runs_dir: str) -> str | None:
    """The run folder with the greatest name, None when there is none."""
    from tpuestimator.runs.frames import latest_run_dir as _latest_run_dir

    return _latest_run_dir(runs_dir)


def run_target(run: str | Mapping[str, Any], prefer: str = "model_dir") -> str | None:
    """The folder a job reads for a run (its fields, or a run or model folder), None when it has none."""
    from tpuestimator.runs.frames import run_target as _run_target

    return _run_target(run, prefer)


def example_prediction_columns(rows: Any, class_names: Any = ()) -> dict:
    """Per-example predictions as {column: list}, R's `tpu_predict()` data frame's columns
    (`tpuestimator.serving.prediction_files.example_prediction_columns`)."""
    from tpuestimator.serving.prediction_files import example_prediction_columns as _columns

    return _columns(rows, [str(c) for c in (class_names or ())])
