"""Reading one run back: `run_record()` (its listing row), `run_info()` (everything about it),
`resolve_run()` (a run from a name, a path, a prefix or ``latest``), `run_status()`.

The one reader of runs: R's ``tpu_ls_runs()`` gets these rows through the bridge
(`tpuestimator.runs.frames`), so both languages list the same columns
(`tpuestimator.runs.columns`). Reading is lenient (one broken run is logged and shown with what
could be read); `check_run_dir()` is the strict side. "Latest" means the
greatest folder name, as in tfruns.
"""
from __future__ import annotations

import json
import logging
import os
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tpuestimator.runs.naming as naming
from tpuestimator.errors import TPUEstimatorError
from tpuestimator.runs.columns import completed_rows, order_columns, parse_property, progress_column
from tpuestimator.runs.record import OWNER_FILE
from tpuestimator.runs.values import X_KEY  # tfruns skips it when it makes metric_<m> columns
from tpuestimator.system.io import json_safe
from tpuestimator.system.processes import process_alive

logger = logging.getLogger(__name__)

LATEST = "latest"


class RunNotFoundError(TPUEstimatorError, FileNotFoundError):
    """A run named on the command line or in a call does not exist."""


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
        logger.warning("Skipping unreadable run file %s: %s", path, exc)
        return None


def property_files(run_dir: str | os.PathLike) -> list[Path]:
    """A run's property files (``tfruns.d/properties/*``, hidden files left out), by name."""
    folder = Path(run_dir) / naming.RECORD_DIR / "properties"
    if not folder.is_dir():
        return []
    return [item for item in sorted(folder.iterdir()) if not item.name.startswith(".") and item.is_file()]


def read_properties(run_dir: str | os.PathLike) -> dict[str, Any]:
    """The typed properties of a run (``tfruns.d/properties/*``)."""
    props: dict[str, Any] = {}
    for item in property_files(run_dir):
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


def run_record(run_dir: str | os.PathLike, *, display_dir: str | None = None) -> dict[str, Any]:
    """One `ls_runs()` row for a run folder (columns in `order_columns()` order)."""
    run_dir = Path(run_dir)
    meta = run_dir / naming.RECORD_DIR
    props = read_properties(run_dir)
    row: dict[str, Any] = {"run_dir": display_dir or str(run_dir)}
    evaluation = read_json(meta / "evaluation.json")
    if isinstance(evaluation, dict):
        for key, value in evaluation.items():
            if value is None or isinstance(value, (dict, list)):  # no value for one cell (as tfruns)
                continue
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
