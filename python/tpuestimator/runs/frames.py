"""Runs as plain columns and values for data frames: what R's ``tpu_ls_runs()``, ``tpu_run_info()``,
``tpu_latest_run()`` and its job functions get through the bridge and only convert (issue 33.4).

`runs_columns()` is `reading.run_record()`'s rows as ``{column: [values]}`` with each column's
type (`columns.column_types()`: ``character``, ``integer``, ``double``, ``logical``, ``time``),
newest run first; `run_summary()` is one run as R's ``tpu_run`` holds it (its properties as the
text of their files, as tfruns keeps them); `run_target()` is the folder a job reads for a run.
Nothing here imports TensorFlow (R lists runs without starting it).
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

import tpuestimator.runs.naming as naming
from tpuestimator.runs.columns import column_types, parse_property
from tpuestimator.runs.reading import property_files, read_json, run_record

# Where runs go when nothing names a folder (tfruns's default, the CLI's --runs-dir default).
DEFAULT_RUNS_DIR = "runs"
# A run's export when its properties name none: the first of these folders inside the run.
EXPORT_FOLDERS = ("export", "exported_model", "savedmodel")
CONFIG_FILES = ("config.yaml", "config.yml", "config.json")
# The order `run_target()` tries a run's folders in, after the one preferred.
TARGET_FIELDS = ("model_dir", "run_dir", "export_dir")


@contextlib.contextmanager
def _collected_warnings() -> Iterator[list[str]]:
    """The reader's warnings (an unreadable file skipped) while the block runs, kept for the
    caller (R turns them into its warnings) instead of going to the log."""
    reading_logger = logging.getLogger("tpuestimator.runs.reading")
    found: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: found.append(record.getMessage())  # type: ignore[method-assign]
    propagate = reading_logger.propagate
    reading_logger.addHandler(handler)
    reading_logger.propagate = False
    try:
        yield found
    finally:
        reading_logger.removeHandler(handler)
        reading_logger.propagate = propagate


def default_runs_dir(chosen: str | None = None) -> str:
    """The runs folder: `chosen` (R's option ``tfruns.runs_dir``) when set, else ``runs``."""
    return chosen if isinstance(chosen, str) and chosen else DEFAULT_RUNS_DIR


def _expand(path: str | os.PathLike) -> Path:
    return Path(os.path.expanduser(os.fspath(path)))


def newest_run_dirs(runs_dir: str | os.PathLike, latest_n: int | None = None) -> list[str]:
    """The run folders of `runs_dir`, newest (greatest name) first, as ``<runs_dir>/<name>``;
    only the `latest_n` newest when given (tfruns's ``latest_n``)."""
    newest = list(reversed(naming.list_run_dirs(_expand(runs_dir))))
    if latest_n is not None:
        newest = newest[:max(int(latest_n), 0)]
    return [os.path.join(os.fspath(runs_dir), d.name) for d in newest]


def runs_columns(runs_dir: str | os.PathLike, latest_n: int | None = None) -> dict[str, Any]:
    """The `ls_runs()` rows of `runs_dir`, newest first, as columns.

    Returns:
      ``{"types": {column: type}, "columns": {column: [value per run]}, "warnings": [text]}``,
      columns in `columns.order_columns()` order, None where a run has no value (R's NA); times
      are epoch seconds; a warning per file skipped as unreadable. No run: empty.
    """
    with _collected_warnings() as warnings:
        rows = [run_record(_expand(d), display_dir=d) for d in newest_run_dirs(runs_dir, latest_n)]
    types = column_types(rows)
    return {"types": types, "columns": {name: [row.get(name) for row in rows] for name in types},
            "warnings": warnings}


def latest_run_dir(runs_dir: str | os.PathLike) -> str | None:
    """The run folder with the greatest name (tfruns's ``latest_run()``), or None."""
    dirs = newest_run_dirs(runs_dir, 1)
    return dirs[0] if dirs else None


def property_texts(run_dir: str | os.PathLike) -> dict[str, str]:
    """A run's properties as the text of their files, lines joined by newlines without the last
    one (what R's ``readLines()`` gives); unreadable bytes replaced."""
    texts: dict[str, str] = {}
    for item in property_files(run_dir):
        try:
            raw = item.read_bytes().decode("utf-8", "replace")
        except OSError:
            continue
        lines = raw.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        texts[item.name] = "\n".join(lines[:-1] if lines and lines[-1] == "" else lines)
    return texts


def _read_config(run_dir: Path) -> Any:
    for name in CONFIG_FILES:
        path = run_dir / name
        if path.is_file():
            try:
                text = path.read_text(encoding="utf-8")
                return json.loads(text) if name.endswith(".json") else yaml.safe_load(text)
            except (OSError, ValueError, yaml.YAMLError):
                return None
    return None


def _resolve(run_dir: Path, path: Any) -> str | None:
    """A folder a run names: absolute when it exists (as given, or inside the run), else as written."""
    if not isinstance(path, str) or not path:
        return None
    for candidate in (_expand(path), run_dir / path):
        if candidate.exists():
            return os.path.realpath(candidate)
    return path


def run_summary(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """One run as R's ``tpu_run`` holds it, or None when `run_dir` is not a run folder.

    Returns:
      ``run_dir`` (absolute), ``model_dir`` and ``export_dir`` (absolute when they exist, else as
      recorded; None when the run names none), ``evaluation``, ``flags``, ``error`` (their files,
      None when absent), ``history`` (metrics.json: {column: values}), ``config`` (the run's
      config.yaml/.yml/.json), ``global_step``, ``completed``, ``start``, ``end`` (typed
      properties, epoch seconds for the times), ``properties`` (every property as text) and
      ``warnings`` (a text per file skipped as unreadable).
    """
    path = _expand(run_dir)
    if not naming.is_run_dir(path):
        return None
    path = Path(os.path.realpath(path))
    meta = path / naming.RECORD_DIR
    texts = property_texts(path)
    config = _read_config(path)
    run_config = config.get("run") if isinstance(config, Mapping) else None
    recorded_model_dir = texts["model_dir"] if "model_dir" in texts else \
        (run_config.get("model_dir") if isinstance(run_config, Mapping) else None)
    export_dir = _resolve(path, texts["export_dir"] if "export_dir" in texts else texts.get("export"))
    if export_dir is None:
        found = [path / name for name in EXPORT_FOLDERS if (path / name).is_dir()]
        export_dir = os.path.realpath(found[0]) if found else None
    step_key = "global_step" if "global_step" in texts else "steps_completed"

    def typed(name: str, key: str | None = None) -> Any:
        key = key or name
        return parse_property(name, texts[key]) if key in texts else None

    with _collected_warnings() as warnings:
        metrics, evaluation = read_json(meta / "metrics.json"), read_json(meta / "evaluation.json")
        flags, error = read_json(meta / "flags.json"), read_json(meta / "error.json")
    return {
        "run_dir": str(path),
        "model_dir": _resolve(path, recorded_model_dir),
        "export_dir": export_dir,
        "evaluation": evaluation,
        "history": metrics if isinstance(metrics, dict) else None,
        "global_step": typed("global_step", step_key),
        "config": config,
        "flags": flags,
        "properties": texts,
        "completed": typed("completed"),
        "start": typed("start"),
        "end": typed("end"),
        "error": error,
        "warnings": warnings,
    }


def run_target(run: str | os.PathLike | Mapping[str, Any], prefer: str = "model_dir") -> str | None:
    """The folder a job (evaluate, export, predict) reads for a run: the `prefer`red one of its
    ``model_dir``, ``run_dir``, ``export_dir``, else the first of them it has (`TARGET_FIELDS`).

    Args:
      run: a run's fields (a mapping, e.g. R's ``tpu_run``), or a path: a run folder (its
        `run_summary()`) or any other folder (itself).
      prefer: the field tried first.

    Returns:
      The folder, or None when the run has none of them.
    """
    if prefer not in TARGET_FIELDS:
        raise ValueError(f"prefer={prefer!r} is not one of {', '.join(TARGET_FIELDS)}")
    if not isinstance(run, Mapping):
        summary = run_summary(run)
        if summary is None:
            return os.path.abspath(_expand(run))
        run = summary
    for field in dict.fromkeys((prefer, *TARGET_FIELDS)):
        value = run.get(field)
        if isinstance(value, str) and value:
            return value
    return None
