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

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .exports import (
    evaluate_export,
    export_info,
    export_job,
    export_model,
    is_export_dir,
    predict,
    predict_files,
    predict_to_file,
    resolve_export_dir,
)
from .interrupts import r_interruptible
from .process_exit import arm_exit_handlers, run_exit_handlers
from .runs import (
    default_runs_dir,
    example_prediction_columns,
    is_run_dir,
    latest_run_dir,
    run_summary,
    run_target,
    runs_columns,
)
from .tables import (
    default_table_dir,
    predict_table,
    predict_table_file,
    predict_table_file_to_file,
    table_export,
    table_frame,
    table_task_note,
    train_table,
    tune_table,
)

__all__ = [
    "arm_exit_handlers",
    "array_from_r",
    "callable_hook",
    "check_config",
    "check_report_dict",
    "compare_report",
    "default_runs_dir",
    "default_table_dir",
    "evaluate_export",
    "evaluate_job",
    "example_prediction_columns",
    "exception_classes",
    "export_info",
    "export_job",
    "export_model",
    "from_json",
    "is_export_dir",
    "is_run_dir",
    "job_result_dict",
    "latest_run_dir",
    "predict",
    "predict_files",
    "predict_table",
    "predict_table_file",
    "predict_table_file_to_file",
    "predict_to_file",
    "quiet_tensorflow",
    "r_callback",
    "r_values",
    "resolve_export_dir",
    "run_cluster",
    "run_exit_handlers",
    "run_job",
    "run_report",
    "run_summary",
    "run_target",
    "runs_columns",
    "start_tensorboard",
    "strings_to_numpy",
    "table_export",
    "table_frame",
    "table_task_note",
    "to_json",
    "tpuestimator_version",
    "train_table",
    "tune_table",
    "tuning_run",
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
    of an R list, mapped by `tpuestimator.config_flags`): validated once per job. A `JobConfig`
    (an unchanged `tpu_config()`, validated when R made it) is used as it is, validated again only
    for what this call changes."""
    from tpuestimator import load_config
    from tpuestimator import run_job as _run_job
    from tpuestimator.config import JobConfig

    flags = json.loads(flags_json) if flags_json else None
    if isinstance(config, JobConfig):
        return _run_job(config.with_overrides(list(overrides), flags=flags), **kwargs)
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
                resume: bool = False, verbose: bool = True, flags_json: str | None = None) -> dict:
    """`tpu_train(cluster = ...)`: the job as a local cluster (`local_cluster.cluster_job`), its
    config loaded once there with the overrides and `flags` (the JSON text of an R list).

    The tasks' log lines arrive on reader threads, where calling back into R is unsafe, so
    they go straight to the process's stderr (file descriptor 2) with their task prefix.
    """
    from tpuestimator.cluster.local_cluster import cluster_job

    def on_line(task, line: str) -> None:
        if verbose:
            os.write(2, f"[{task.name}] {line}\n".encode("utf-8", "replace"))

    return cluster_job(config, overrides=list(overrides), workers=int(workers), ps=int(ps),
                       evaluator=bool(evaluator), restarts=int(restarts), model_dir=model_dir, runs_dir=runs_dir,
                       export=bool(export), resume=bool(resume), on_line=on_line,
                       flags=json.loads(flags_json) if flags_json else None)


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
