"""Reading runs back: `ls_runs()`, `latest_run()`, `run_info()`, `resolve_run()`, `clean_runs()`.

The columns follow tfruns's ``ls_runs()`` and are the SAME, with the same names, types and
order, as R's ``tpu_ls_runs()`` (R/runs.R; docs/RUN_FORMAT.md, "Reading runs"; proved by
tests/python/test_runs_columns.py and tests/testthat/test-runs-columns.R on
tests/fixtures/runs/): ``run_dir``, ``eval_<m>`` (evaluation.json), ``metric_<m>`` (last
non-null value of every metrics.json array but ``epoch``, the x axis, which tfruns skips),
``flag_<f>`` (flags.json), then `FRONT_COLUMNS` (with ``steps_completed`` or
``epochs_completed``, chosen and counted as tfruns does: `progress_column()`), ``status`` (ours: ``completed``,
``failed``, ``running``, ``interrupted``), then the other properties sorted by name.
`column_types()` gives each column's type.

Over 400 lines on purpose: this is the one Python reader, kept line for line beside R's
(R/runs.R) so the shared-fixture tests can hold the two to the same columns; splitting it
would spread one contract over several files.

"Latest" means the greatest folder name, as in tfruns. Reading is lenient (one broken run is
logged and shown with what could be read); `check_run_dir()` is the strict side.
"""
from __future__ import annotations

import json
import logging
import math
import os
import shutil
import tarfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import tpuestimator.runs.naming as naming
from tpuestimator.errors import TPUEstimatorError
from tpuestimator.runs.record import OWNER_FILE
from tpuestimator.runs.values import X_KEY  # tfruns skips it when it makes metric_<m> columns
from tpuestimator.system.io import json_safe
from tpuestimator.system.processes import process_alive

logger = logging.getLogger(__name__)

# The column types and order, shared with R's tpu_ls_runs() (schema/run_columns.json, which
# R/runs.R reads too, and both test suites check against tests/fixtures/runs).
_COLUMNS = json.loads(resources.files("tpuestimator.schema").joinpath("run_columns.json").read_text())
INT_PROPERTIES = tuple(_COLUMNS["integer_properties"])
# start and end are epoch seconds here (R makes them POSIXct).
FLOAT_PROPERTIES = tuple(_COLUMNS["double_properties"] + _COLUMNS["time_properties"])
BOOL_PROPERTIES = tuple(_COLUMNS["logical_properties"])
INT_COLUMNS = INT_PROPERTIES + tuple(_COLUMNS["integer_columns"])
FRONT_COLUMNS = tuple(_COLUMNS["front_columns"])
# tfruns R/ls_runs.R: valid_steps_units; get_steps_unit() takes the first one that is a property.
STEPS_UNITS = tuple(_COLUMNS["steps_units"])

LATEST = "latest"


class RunNotFoundError(TPUEstimatorError, FileNotFoundError):
    """A run named on the command line or in a call does not exist."""


# --------------------------------------------------------------------------- reading
def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (R's jsonlite rejects it)")


def read_json(path: Path) -> Any:
    """Reads a run's JSON file as R's jsonlite does: None (and a warning in the log) when the
    file is absent, broken or holds NaN/Infinity, so both readers skip the same files."""
    if not path.is_file():
        return None
    try:
        return json_safe(json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constants))
    except (OSError, ValueError) as exc:
        logger.warning("Cannot read %s: %s", path, exc)
        return None


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


def read_properties(run_dir: str | os.PathLike) -> dict[str, Any]:
    """The typed properties of a run (``tfruns.d/properties/*``)."""
    folder = Path(run_dir) / naming.RECORD_DIR / "properties"
    props: dict[str, Any] = {}
    if not folder.is_dir():
        return props
    for item in sorted(folder.iterdir()):
        if item.name.startswith(".") or not item.is_file():
            continue
        try:
            text = item.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        props[item.name] = parse_property(item.name, text)
    return props


def _owner_alive(run_dir: Path, start: float | None) -> bool:
    owner = read_json(run_dir / naming.RECORD_DIR / OWNER_FILE)
    if not isinstance(owner, dict):
        return False
    return process_alive(owner.get("host"), owner.get("pid"), start)


def run_status(run_dir: str | os.PathLike, properties: Mapping[str, Any] | None = None) -> str:
    """``completed``, ``restarted`` (a ``restarted`` property: a whole-cluster restart continued its
    training in another run), ``failed`` (error.json), ``interrupted`` (an ``interrupted``
    property: stopped by a signal) or, else, ``running`` (its process is alive) or
    ``interrupted`` (it is not)."""
    run_dir = Path(run_dir)
    props = read_properties(run_dir) if properties is None else properties
    if props.get("completed") is True:
        return "completed"
    if props.get("restarted") not in (None, ""):
        return "restarted"
    if (run_dir / naming.RECORD_DIR / "error.json").is_file():
        return "failed"
    if props.get("interrupted") not in (None, ""):  # stopped by a signal (RunRecorder.interrupt)
        return "interrupted"
    return "running" if _owner_alive(run_dir, props.get("start")) else "interrupted"


def _last_value(values: Any) -> Any:
    if not isinstance(values, list):
        return None
    for value in reversed(values):
        if value is not None:
            return value
    return None


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


def run_record(run_dir: str | os.PathLike, *, display_dir: str | None = None) -> dict[str, Any]:
    """One `ls_runs()` row for a run folder (columns in `order_columns()` order)."""
    run_dir = Path(run_dir)
    meta = run_dir / naming.RECORD_DIR
    props = read_properties(run_dir)
    row: dict[str, Any] = {"run_dir": display_dir or str(run_dir)}
    evaluation = read_json(meta / "evaluation.json")
    if isinstance(evaluation, dict):
        for key, value in evaluation.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                value = float(value)
            row[f"eval_{key}"] = value
    metrics_path = meta / "metrics.json"
    metrics = read_json(metrics_path)
    if isinstance(metrics, dict):
        for key, values in metrics.items():
            if key == X_KEY:
                continue
            last = _last_value(values)
            if last is not None:
                row[f"metric_{key}"] = float(last) if isinstance(last, (int, float)) else last
        row["metrics"] = str(metrics_path) if display_dir is None else os.path.join(display_dir, naming.RECORD_DIR,
                                                                                    "metrics.json")
    flags = read_json(meta / "flags.json")
    if isinstance(flags, dict):
        for key, value in flags.items():
            if value is not None and not isinstance(value, (dict, list)):
                row[f"flag_{key}"] = value
    # tfruns always gives the progress column (0 without metrics.json).
    row[progress_column(props)] = completed_rows(metrics)
    for key, value in props.items():
        if key not in row and value is not None:
            row[key] = value
    if "completed" not in row:
        row["completed"] = False
    row["status"] = run_status(run_dir, props)
    error = read_json(meta / "error.json")
    if isinstance(error, dict):
        if error.get("message") is not None:
            row["error_message"] = str(error["message"])
        frames = error.get("traceback")
        if isinstance(frames, list):
            row["error_traceback"] = "\n".join(str(f) for f in frames)
    source = meta / "source.tar.gz"
    if source.is_file():
        row["source_code"] = str(source) if display_dir is None else os.path.join(display_dir, naming.RECORD_DIR,
                                                                                  "source.tar.gz")
    return order_columns(row)


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


def resolve_run(run: str | os.PathLike, runs_dir: str | os.PathLike = "runs") -> Path:
    """Finds a run folder from a folder name, a path, a unique name prefix, or ``latest``.

    Raises:
      RunNotFoundError: naming what was looked for and where.
    """
    text = str(run)
    if text == LATEST:
        dirs = naming.list_run_dirs(runs_dir)
        if not dirs:
            raise RunNotFoundError(f"run 'latest': there are no runs in {runs_dir}/. Train first, or pass "
                                   "--runs-dir with the folder that holds your runs.")
        return dirs[-1]
    path = Path(text)
    if naming.is_run_dir(path):
        return path
    candidate = Path(runs_dir) / text
    if naming.is_run_dir(candidate):
        return candidate
    prefixed = [d for d in naming.list_run_dirs(runs_dir) if d.name.startswith(text)]
    if len(prefixed) == 1:
        return prefixed[0]
    if len(prefixed) > 1:
        raise RunNotFoundError(f"run {text!r} matches {len(prefixed)} runs in {runs_dir}/ "
                               f"({', '.join(d.name for d in prefixed[:5])}...). Give more of the name.")
    hint = ""
    if path.is_dir():
        hint = f" {text} is a folder but has no {naming.RECORD_DIR}/ folder, so it is not a run."
    raise RunNotFoundError(f"run {text!r} not found in {runs_dir}/.{hint} Expected a run folder name "
                           "(see `tpuestimator runs ls`), a path to a run folder, or 'latest'.")


def _source_files(tar_path: Path, limit: int = 200_000) -> dict[str, str]:
    files: dict[str, str] = {}
    if not tar_path.is_file():
        return files
    try:
        with tarfile.open(tar_path, "r:gz") as tar:
            for member in tar.getmembers():
                if not member.isfile() or member.size > limit:
                    continue
                fh = tar.extractfile(member)
                if fh is None:
                    continue
                try:
                    text = fh.read().decode("utf-8")
                except UnicodeDecodeError:
                    continue
                name = member.name[len("source/"):] if member.name.startswith("source/") else member.name
                files[name] = text
    except (OSError, tarfile.TarError) as exc:
        logger.warning("Cannot read %s: %s", tar_path, exc)
    return files


def _artifacts(run_dir: Path) -> list[str]:
    """Files of a run other than its record and its logs (relative paths), like tfruns's file list."""
    out = []
    for root, dirs, files in os.walk(run_dir):
        rel_root = Path(root).relative_to(run_dir)
        if rel_root == Path("."):
            dirs[:] = [d for d in dirs if d not in (naming.RECORD_DIR, "logs") and not d.startswith(".")]
        else:
            dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if not name.startswith("."):
                out.append(str(rel_root / name) if rel_root != Path(".") else name)
    return sorted(out)


def run_info(run: str | os.PathLike, runs_dir: str | os.PathLike = "runs") -> dict[str, Any]:
    """Everything about one run (a name, path or ``latest``).

    Returns:
      A dict with ``run_dir``, ``name``, ``status``, ``properties``, ``flags``, ``metrics``,
      ``evaluation``, ``sidecar_evaluations`` (the side-car evaluator's evaluations, each
      with its ``step``; [] without one), ``error`` (None unless failed), ``duration`` (seconds), ``plots``
      (PNG paths), ``artifacts`` (relative file paths), ``source`` ({file: text}), ``output``
      (the text of an ``output.log`` artifact, else the ``output`` property, or None), ``logs_dir`` and ``row`` (the
      `ls_runs()` row).
    """
    run_dir = resolve_run(run, runs_dir)
    meta = run_dir / naming.RECORD_DIR
    props = read_properties(run_dir)
    start, end = props.get("start"), props.get("end")
    output_path = run_dir / "output.log"
    output = None
    if output_path.is_file():
        output = output_path.read_text(encoding="utf-8", errors="replace")
    elif isinstance(props.get("output"), str):  # tfruns's place for it (a run made inside training_run())
        output = props["output"]
    metrics = read_json(meta / "metrics.json")
    return {
        "run_dir": str(run_dir),
        "name": run_dir.name,
        "status": run_status(run_dir, props),
        "properties": props,
        "flags": read_json(meta / "flags.json") or {},
        "metrics": metrics if isinstance(metrics, dict) else {},
        "evaluation": read_json(meta / "evaluation.json") or {},
        # the side-car evaluator's own file (tpuestimator.cluster.sidecar): it never writes the chief's files
        "sidecar_evaluations": (read_json(meta / "sidecar_evaluations.json") or {}).get("evaluations", []),
        "error": read_json(meta / "error.json"),
        "duration": (end - start) if isinstance(start, float) and isinstance(end, float) else None,
        "plots": [str(p) for p in sorted((run_dir / "plots").glob("*.png"))],
        "artifacts": _artifacts(run_dir),
        "source": _source_files(meta / "source.tar.gz"),
        "output": output,
        "logs_dir": str(run_dir / "logs"),
        "row": run_record(run_dir),
    }


def clean_runs(runs: Iterable[str | os.PathLike | Mapping[str, Any]] | None = None,
               runs_dir: str | os.PathLike = "runs") -> list[Path]:
    """Moves runs to ``<runs_dir>/archive/`` (tfruns's ``clean_runs()``).

    Args:
      runs: run names, paths, ``latest`` or `ls_runs()` rows; None moves every run.
      runs_dir: the runs folder.

    Returns:
      The new paths of the archived runs.
    """
    if runs is None:
        targets = naming.list_run_dirs(runs_dir)
    else:
        targets = [resolve_run(r["run_dir"] if isinstance(r, Mapping) else r, runs_dir) for r in runs]
    archive = Path(runs_dir) / naming.ARCHIVE_DIR
    moved = []
    for run_dir in dict.fromkeys(targets):
        dest = archive / run_dir.name
        if dest.exists():
            raise FileExistsError(f"cannot archive {run_dir}: {dest} already exists. Remove or rename it first.")
        archive.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(run_dir, dest)
        except OSError:  # another file system
            shutil.move(str(run_dir), str(dest))
        moved.append(dest)
        logger.info("Archived %s -> %s", run_dir, dest)
    return moved
