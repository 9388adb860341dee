"""Python side of the tpuestimatorr R package.

The R package reaches the tpuestimator core through reticulate. It calls the core's public
API (`tpuestimator.load_config`, `tpuestimator.__version__`) directly and everything else
through this module, so a change of the core's internals is adapted here, in one place. The
functions that run jobs hold R's interrupts while they run (`interrupts.py`), so a Ctrl-C is
one KeyboardInterrupt in Python and R's interrupt condition back in R. The module is shipped
in the R package (`inst/python`, installed as `system.file("python", package =
"tpuestimatorr")`) and imported lazily, the first time an R function needs it; it does not
import TensorFlow itself.

It also holds the conversions reticulate 1.28 cannot do: numpy >= 2 arrays (R sends the raw
bytes of its column-major vector) and values R reads back through strict JSON.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .interrupts import r_interruptible
from .runs import (
    default_runs_dir,
    example_prediction_columns,
    is_run_dir,
    latest_run_dir,
    run_summary,
    run_target,
    runs_columns,
)

__all__ = [
    "array_from_r",
    "callable_hook",
    "check_config",
    "check_report_dict",
    "compare_report",
    "default_runs_dir",
    "default_table_dir",
    "evaluate_export",
    "evaluate_job",
    "export_info",
    "example_prediction_columns",
    "exception_classes",
    "flag_overrides",
    "export_job",
    "export_model",
    "from_json",
    "is_export_dir",
    "is_run_dir",
    "job_result_dict",
    "latest_run_dir",
    "predict",
    "predict_files",
    "predict_to_file",
    "quiet_tensorflow",
    "resolve_export_dir",
    "r_callback",
    "r_values",
    "run_cluster",
    "run_job",
    "run_report",
    "run_summary",
    "run_target",
    "runs_columns",
    "start_tensorboard",
    "strings_to_numpy",
    "to_json",
    "tuning_run",
    "tpuestimator_version",
    "write_example",
    "write_tfrecords",
]

# numpy dtype of the bytes R's writeBin() writes for each storage mode.
_R_BYTES = {"double": "<f8", "integer": "<i4"}


# ---- conversions ----------------------------------------------------------------------------


def _json_default(value: Any) -> Any:
    """What `json.dumps` cannot write itself: arrays, bytes, paths; anything else as text."""
    from tpuestimator.system.io import json_safe

    if hasattr(value, "tolist") and callable(value.tolist):
        return json_safe(value.tolist())
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value)


def to_json(value: Any) -> str:
    """Strict JSON (NaN and +-Inf become null) of a Python value, for R's jsonlite.

    Args:
      value: dicts, lists, tuples, scalars, numpy scalars and arrays, bytes, paths.

    Returns:
      The JSON text; values JSON has no form for are written as their `str()`.
    """
    from tpuestimator.system.io import json_safe

    return json.dumps(json_safe(value), allow_nan=False, default=_json_default)


# R's integers are 32-bit: reticulate turns a Python int beyond them into a wrong (negative)
# R integer. Such ints go to R as doubles (exact up to 2^53).
_R_INT_MAX = 2**31 - 1


def r_values(value: Any) -> Any:
    """`value` with every int outside R's integer range (numpy ints too) as a float, at any
    depth of dicts, lists and tuples: what reticulate converts directly (exception fields,
    callback arguments) then reads right in R. JSON (`to_json`) needs no help: jsonlite reads
    such numbers as doubles."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) or (getattr(value, "ndim", None) == 0
                                  and getattr(getattr(value, "dtype", None), "kind", None) in ("i", "u")):
        number = int(value)
        return float(number) if abs(number) > _R_INT_MAX else number
    if isinstance(value, Mapping):
        return {k: r_values(v) for k, v in value.items()}
    if type(value) in (list, tuple):   # plain ones: a named tuple's fields stay as they are
        return type(value)(r_values(v) for v in value)
    return value


# What an R callback (R/conditions.R, wrap_r_callback) returns when a Ctrl-C landed while it ran;
# the same text as R's r_interrupt_marker.
R_INTERRUPT_MARKER = "tpuestimatorr: R interrupt (Ctrl-C)"


def r_callback(fn):
    """A Python callable calling the R function `fn` (wrapped by reticulate) with `r_values`
    of its arguments: progress callbacks, hooks and model functions get big ints right. An R
    interrupt inside `fn` (its `R_INTERRUPT_MARKER` result) is raised as KeyboardInterrupt."""
    import functools

    @functools.wraps(fn)
    def call(*args, **kwargs):
        result = fn(*(r_values(a) for a in args), **{k: r_values(v) for k, v in kwargs.items()})
        if isinstance(result, str) and result == R_INTERRUPT_MARKER:
            raise KeyboardInterrupt("Ctrl-C in R (while an R callback ran)")
        return result

    return call


def from_json(text: str) -> Any:
    """Python value of JSON text written by R's jsonlite."""
    return json.loads(text)


def exception_classes(exc: BaseException) -> list[str]:
    """Class names along the exception's MRO (R maps the first known one to a condition class)."""
    return [klass.__name__ for klass in type(exc).__mro__]


def array_from_r(buf: bytes, kind: str, shape: Sequence[int], dtype: str):
    """numpy array from the raw little-endian bytes of an R vector in column-major order.

    reticulate 1.28 cannot hand R arrays to numpy 2 (its binary version check refuses it).

    Args:
      buf: `writeBin(as.vector(x), raw(), size = 8 or 4, endian = "little")`.
      kind: `"double"` or `"integer"` (R's storage mode).
      shape: `dim(x)` (or `length(x)`).
      dtype: the numpy dtype of the result, e.g. `"float32"`.

    Returns:
      A C-contiguous array `a` with `a[i - 1, j - 1] == x[i, j]`.

    Raises:
      ValueError: for an unknown `kind` or a `shape` that does not match the bytes.
    """
    import numpy as np

    if kind not in _R_BYTES:
        raise ValueError(f"`kind` must be one of {sorted(_R_BYTES)}. Received: kind={kind!r}")
    flat = np.frombuffer(bytes(buf), dtype=_R_BYTES[kind])
    array = flat.reshape(tuple(int(s) for s in shape), order="F")
    return np.ascontiguousarray(array.astype(dtype))


def strings_to_numpy(values: Iterable[Any]):
    """numpy object array of strings (R character vectors, factors' labels)."""
    import numpy as np

    return np.asarray([str(v) for v in values], dtype=object)


# ---- the core -------------------------------------------------------------------------------


def tpuestimator_version() -> str:
    """`tpuestimator.__version__` (imports the package, not TensorFlow)."""
    import tpuestimator

    return str(tpuestimator.__version__)


def job_result_dict(result: Any) -> dict:
    """The fields of a `run_job()` result as a dict (run_dir, model_dir, export_dir, metrics,
    history, global_step, config, ...)."""
    if isinstance(result, Mapping):
        return dict(result)
    if hasattr(result, "to_dict"):
        return result.to_dict()
    return dict(vars(result))


@r_interruptible
def run_job(config: Any, overrides: Sequence[str] = (), flags_json: str | None = None, **kwargs: Any) -> Any:
    """`tpu_train()`: `tpuestimator.run_job` with R's interrupts held (`interrupts.py`). The config
    (a file, or an R list as JSON) is loaded here once with its overrides and `flags` (the JSON text
    of an R list, mapped by `tpuestimator.config_flags`): validated once per job."""
    from tpuestimator import load_config
    from tpuestimator import run_job as _run_job

    flags = json.loads(flags_json) if flags_json else None
    return _run_job(load_config(config, list(overrides), flags=flags), **kwargs)


def callable_hook(fn, name: str):
    """A hook calling `fn(event, info)` at every event (an R function wrapped by reticulate)."""
    from tpuestimator.core.hooks import CallableHook

    return CallableHook(fn, name=name)


@r_interruptible
def evaluate_job(model_dir: str, data_pattern: str | None = None) -> dict:
    """Metrics of the latest checkpoint in `model_dir` (a run or model folder)."""
    from tpuestimator.jobs.model_dir_jobs import evaluate_job as _evaluate_job

    return _evaluate_job(model_dir, data_pattern=data_pattern)


@r_interruptible
def evaluate_export(export_dir: str, data_pattern: str | None = None, runs_dir: str | None = None,
                    record: bool = True) -> dict:
    """Offline evaluation of an export: metrics, per-class table, confusion matrix, run folder."""
    from tpuestimator.jobs.export_jobs import evaluate_export as _evaluate_export

    return _evaluate_export(export_dir, data_pattern=data_pattern, runs_dir=runs_dir, record=record)


@r_interruptible
def predict_files(export_dir: str, files: Sequence[str], batch_size: int = 1024) -> dict:
    """Streaming predictions over TFRecord/image files or patterns, as {column: list}."""
    from tpuestimator.jobs.export_jobs import predict_columns

    return predict_columns(export_dir, list(files), batch_size=int(batch_size))


@r_interruptible
def predict_to_file(export_dir: str, files: Sequence[str], out: str, batch_size: int = 1024) -> dict:
    """Streaming predictions written to a .csv or .parquet file; {path, rows, format}."""
    from tpuestimator.jobs.export_jobs import predict_to_file as _predict_to_file

    return _predict_to_file(export_dir, list(files), out, batch_size=int(batch_size))


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


@r_interruptible
def export_job(model_dir: str, export_dir: str, format: str = "saved_model") -> Any:
    """Exports the latest checkpoint in `model_dir`; returns the export's path."""
    from tpuestimator.jobs.model_dir_jobs import export_job as _export_job

    return _export_job(model_dir, export_dir, format=format)


@r_interruptible
def export_model(model_dir: str, export_dir: str, format: str = "saved_model", quantize: str | None = None,
                 warmup: int | None = None, representative_batches: int | None = None) -> dict:
    """Exports the latest checkpoint in `model_dir`: `path`, `saved_model`, `tflite` (the .tflite's
    verification report or None), `warmup_requests`."""
    import dataclasses

    from tpuestimator.jobs.model_dir_jobs import export_model as _export_model

    result = _export_model(model_dir, export_dir, format=format, quantize=quantize, warmup=warmup,
                           representative_batches=representative_batches)
    return dataclasses.asdict(result)


@r_interruptible
def predict(export_dir: str, features: Any) -> list[dict]:
    """Per-example predictions of the SavedModel in `export_dir`."""
    from tpuestimator.serving.exports import predict as _predict

    return _predict(export_dir, features)


@r_interruptible
def check_config(config: Any) -> Any:
    """TPU-readiness report of a config (a `JobConfig`, a dict or a file path)."""
    from tpuestimator.jobs.check import check_config as _check_config

    return _check_config(config)


def check_report_dict(report: Any) -> dict:
    """A check report as a dict: `ok` and `results` (name, ok, detail)."""
    return report.to_dict() if hasattr(report, "to_dict") else {"text": str(report)}


@r_interruptible
def write_tfrecords(source: Any, out_dir: str, **kwargs: Any) -> dict:
    """TFRecord shards plus a manifest from R data; returns the manifest."""
    from tpuestimator.data import write_tfrecords as _write_tfrecords

    return _write_tfrecords(source, out_dir, **kwargs)


@r_interruptible
def write_example(name: str, out_dir: str, source_dir: str | None = None, limit: int | None = None) -> str:
    """Writes an example (config + data); returns the config file's path. `source_dir` and
    `limit`: fashion_mnist's folder of IDX files and its number of training images."""
    from tpuestimator.examples import write_example as _write_example

    return _write_example(name, out_dir, source_dir=source_dir, limit=limit)


def quiet_tensorflow(quiet: bool = True) -> None:
    """TensorFlow's C++ log lines and retracing warnings kept off (or back on) the R console."""
    from tpuestimator.system.console import quiet_tensorflow as _quiet_tensorflow

    _quiet_tensorflow(bool(quiet))


@r_interruptible
def run_cluster(config: Any, overrides: Sequence[str] = (), *, workers: int, ps: int = 0, evaluator: bool = False,
                restarts: int = 0, model_dir: str | None = None, runs_dir: str | None = None, export: bool = True,
                resume: bool = False, verbose: bool = True) -> dict:
    """`tpu_train(cluster = ...)`: the job as a local cluster (`local_cluster.cluster_job`).

    The tasks' log lines arrive on reader threads, where calling back into R is unsafe, so
    they go straight to the process's stderr (file descriptor 2) with their task prefix.
    """
    from tpuestimator.cluster.local_cluster import cluster_job

    def on_line(task, line: str) -> None:
        if verbose:
            os.write(2, f"[{task.name}] {line}\n".encode("utf-8", "replace"))

    return cluster_job(config, overrides=list(overrides), workers=int(workers), ps=int(ps),
                       evaluator=bool(evaluator), restarts=int(restarts), model_dir=model_dir, runs_dir=runs_dir,
                       export=bool(export), resume=bool(resume), on_line=on_line)


def flag_overrides(config: Any, overrides: Sequence[str], flags_json: str, base_dir: str | None = None) -> list[str]:
    """`tpu_train(flags = )`: the flags (JSON text of an R list) as ``key=value`` overrides of
    the config (`tpuestimator.config_flags`); a flag naming no field raises a ConfigError."""
    from tpuestimator.config import load_config
    from tpuestimator.config_flags import flag_overrides as _flag_overrides

    cfg = load_config(config, list(overrides), base_dir=base_dir)
    return _flag_overrides(cfg, json.loads(flags_json))


@r_interruptible
def tuning_run(config: Any, flags_json: str, *, overrides: Sequence[str] = (), sample: float | None = None,
               runs_dir: str | None = None, on_run: Any = None, **job_kwargs: Any) -> list[str]:
    """`tpu_tuning_run()`: `tpuestimator.jobs.tune.tuning_run`; returns the run folders trained.
    `on_run(i, n, label)` (an R function) hears of each combination before it trains."""
    from tpuestimator.jobs.tune import tuning_run as _tuning_run

    def announce(i: int, n: int, combo: dict) -> None:
        if on_run is not None:
            on_run(i, n, ", ".join(f"{k}={v}" for k, v in combo.items()))

    results = _tuning_run(config, json.loads(flags_json), sample=None if sample is None else float(sample),
                          overrides=list(overrides), runs_dir=runs_dir, on_run=announce, **job_kwargs)
    return [str(r.run_dir) for r in results if r.run_dir]


def run_report(run_dir: str, out: str) -> str:
    """`tpu_view_run()`: the HTML report of a run (`tpuestimator.runs.report`)."""
    from tpuestimator.runs.report import write_run_report

    return str(write_run_report(run_dir, out))


def compare_report(run_a: str, run_b: str, out: str) -> str:
    """`tpu_compare_runs()`: the HTML comparison of two runs (`tpuestimator.runs.report`)."""
    from tpuestimator.runs.report import write_compare_report

    return str(write_compare_report(run_a, run_b, out))


def start_tensorboard(logdir: Any, port: Any = "auto", timeout: float = 60.0, reload_interval: float = 5.0) -> Any:
    """`tpu_tensorboard()`: a running `TensorBoardServer` (`.url`, `.pid`, `.stop()`)."""
    from tpuestimator.runs.tensorboard import start_tensorboard as _start_tensorboard

    port = port if port == "auto" else int(port)
    return _start_tensorboard(logdir, port=port, timeout=float(timeout),
                              extra_args=["--reload_interval", str(reload_interval)])


def resolve_export_dir(path: str) -> str:
    """The SavedModel a run, model or export folder means (`tpuestimator.serving.exports.resolve_export_dir`)."""
    from tpuestimator.serving.exports import resolve_export_dir as _resolve_export_dir

    return _resolve_export_dir(path)


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
    a run's flags as the JSON text of an R list, mapped as `flag_overrides` maps them)."""
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


def export_info(export_dir: str) -> dict | None:
    """An export's metadata (`tpuestimator.serving.export_info.ExportInfo`, as its file's dict),
    None for a folder tpuestimator did not export: what R reads of an export (class names, the
    feature spec), from the one reader."""
    from tpuestimator.serving.export_info import read_export_info

    info = read_export_info(export_dir)
    return info.to_dict() if info is not None else None


def default_table_dir(label: str, model: str, run_dir: str | None = None) -> str:
    """A table model's folder when R names none (`tpuestimator.tables.api.default_table_dir`)."""
    from tpuestimator.tables.api import default_table_dir as _default_table_dir

    return _default_table_dir(label, model, run_dir)


def is_export_dir(path: str) -> bool:
    """Whether `path` is an export tpuestimator wrote (`tpuestimator.serving.exports.is_export_dir`)."""
    from tpuestimator.serving.exports import is_export_dir as _is_export_dir

    return _is_export_dir(path)


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
