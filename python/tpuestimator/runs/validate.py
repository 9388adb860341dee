"""`check_run_dir()`: every rule of docs/RUN_FORMAT.md, checked on a run folder.

One broken run makes tfruns's ``ls_runs()`` fail for the whole runs folder, so tests and
``tpuestimator runs ls --check`` check each rule on real folders. Each violation is one line
naming the file, what is wrong and the rule.
"""
from __future__ import annotations

import json
import math
import os
import tarfile
from pathlib import Path
from typing import Any

import tpuestimator.runs.naming as naming
from tpuestimator.runs.columns import BOOL_PROPERTIES, FLOAT_PROPERTIES, INT_PROPERTIES, completed_rows, progress_column


class _NonFinite(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _NonFinite(name)


def _strict_json(path: Path, rel: str, problems: list[str]) -> tuple[bool, Any]:
    """(parsed ok, value); adds a problem for NaN/Infinity (rule 3) or invalid JSON."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        problems.append(f"{rel}: not UTF-8 text")
        return False, None
    except OSError as exc:
        problems.append(f"{rel}: cannot be read ({exc})")
        return False, None
    try:
        return True, json.loads(text, parse_constant=_reject_constant)
    except _NonFinite as exc:
        problems.append(f"{rel}: contains {exc} (rule 3: no NaN or Infinity in JSON; write null in metric "
                        "arrays and leave the value out of flags and evaluation)")
    except ValueError as exc:
        problems.append(f"{rel}: invalid JSON ({exc}) (rule 8: write files atomically)")
    return False, None


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (str, bool, int, float))


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _check_properties(props_dir: Path, problems: list[str]) -> dict[str, str]:
    props: dict[str, str] = {}
    if not props_dir.is_dir():
        problems.append("tfruns.d/properties/: missing (rule 1: properties/start must exist)")
        return props
    for item in props_dir.iterdir():
        if item.name.startswith("."):
            continue
        if not item.is_file():
            problems.append(f"tfruns.d/properties/{item.name}: not a file (one file per property)")
            continue
        try:
            props[item.name] = item.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"tfruns.d/properties/{item.name}: unreadable ({exc})")
            continue
        if not props[item.name].endswith("\n"):
            problems.append(f"tfruns.d/properties/{item.name}: no final newline (rule 9: R's readLines() warns "
                            "\"incomplete final line\" at every read)")
    for name in ("start", "end"):
        if name not in props:
            problems.append(f"tfruns.d/properties/{name}: missing (rule 1: every run has start and end)")
    for name in FLOAT_PROPERTIES:
        if name in props and _number(props[name].strip()) is None:
            problems.append(f"tfruns.d/properties/{name}: {props[name].strip()!r} is not a finite number")
    for name in INT_PROPERTIES:
        if name in props:
            value = _number(props[name].strip())
            if value is None or not value.is_integer():
                problems.append(f"tfruns.d/properties/{name}: {props[name].strip()!r} is not an integer "
                                "(tfruns types it as integer)")
    for name in BOOL_PROPERTIES:
        if name in props and props[name].strip() not in ("TRUE", "FALSE"):
            problems.append(f"tfruns.d/properties/{name}: {props[name].strip()!r} is not TRUE or FALSE")
    if "completed" not in props:
        problems.append("tfruns.d/properties/completed: missing (write FALSE at creation, TRUE at the end)")
    if not props.get("script", "").strip():
        problems.append("tfruns.d/properties/script: missing or empty (rule 2: view_run() and compare_runs() "
                        "need it)")
    if props.get("interrupted", "").strip() and props.get("completed", "").strip() == "TRUE":
        problems.append("tfruns.d/properties/interrupted: set on a completed run (an interrupted run keeps "
                        "completed FALSE: RunRecorder.interrupt)")
    start, end = _number(props.get("start", "").strip()), _number(props.get("end", "").strip())
    if start is not None and end is not None and end < start:
        problems.append(f"tfruns.d/properties/end: {end} is before start {start}")
    return props


def check_run_dir(run_dir: str | os.PathLike) -> list[str]:
    """Checks a run folder against every tfruns format rule.

    Args:
      run_dir: the run folder (``runs/2026-11-29T10-23-38Z``).

    Returns:
      The violations, one line each; empty when the run is valid.
    """
    run_dir = Path(run_dir)
    problems: list[str] = []
    meta = run_dir / naming.RECORD_DIR
    if not meta.is_dir():
        return [f"{run_dir}: no {naming.RECORD_DIR}/ folder, so it is not a run"]
    if not naming.is_run_name(run_dir.name):
        problems.append(f"{run_dir.name}: folder name is not a UTC start time %Y-%m-%dT%H-%M-%SZ "
                        "(latest_run() sorts by folder name)")
    props = _check_properties(meta / "properties", problems)

    flags_path = meta / "flags.json"
    if flags_path.exists():
        ok, flags = _strict_json(flags_path, "tfruns.d/flags.json", problems)
        if ok:
            if not isinstance(flags, dict):
                problems.append(f"tfruns.d/flags.json: a {type(flags).__name__}, not an object of flags")
            else:
                for key, value in flags.items():
                    if value is None:
                        problems.append(f"tfruns.d/flags.json: flag {key!r} is null (rule 4: no null in flags)")
                    elif not _is_scalar(value):
                        problems.append(f"tfruns.d/flags.json: flag {key!r} is a {type(value).__name__} "
                                        "(rule 5: flags are flat scalars; flatten or serialise it)")

    eval_path = meta / "evaluation.json"
    if eval_path.exists():
        ok, evaluation = _strict_json(eval_path, "tfruns.d/evaluation.json", problems)
        if ok:
            if not isinstance(evaluation, dict):
                problems.append(f"tfruns.d/evaluation.json: a {type(evaluation).__name__}, not an object "
                                "(rule 6: evaluation.json is an object)")
            else:
                for key, value in evaluation.items():
                    if value is None:
                        problems.append(f"tfruns.d/evaluation.json: {key!r} is null (rule 4: no null in evaluation)")
                    elif not _is_scalar(value):
                        problems.append(f"tfruns.d/evaluation.json: {key!r} is a {type(value).__name__}, "
                                        "not a scalar")

    metrics_path = meta / "metrics.json"
    metrics = None
    if metrics_path.exists():
        ok, metrics = _strict_json(metrics_path, "tfruns.d/metrics.json", problems)
        if ok:
            if not isinstance(metrics, dict):
                problems.append(f"tfruns.d/metrics.json: a {type(metrics).__name__}, not an object of arrays")
            else:
                lengths = {}
                for key, values in metrics.items():
                    if not isinstance(values, list):
                        problems.append(f"tfruns.d/metrics.json: {key!r} is a {type(values).__name__}, not an array")
                        continue
                    lengths[key] = len(values)
                    bad = [v for v in values if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)))]
                    if bad:
                        problems.append(f"tfruns.d/metrics.json: {key!r} holds non-numbers ({bad[0]!r}); "
                                        "only numbers and null")
                if len(set(lengths.values())) > 1:
                    problems.append("tfruns.d/metrics.json: arrays differ in length "
                                    f"({', '.join(f'{k}={n}' for k, n in lengths.items())}) (rule 7: pad with null)")
                _check_metric_names(metrics, problems)

    for extra in sorted(meta.glob("*.json")):
        if extra.name not in ("flags.json", "evaluation.json", "metrics.json"):
            ok, value = _strict_json(extra, f"tfruns.d/{extra.name}", problems)
            if ok and extra.name == "error.json":
                if not isinstance(value, dict) or not isinstance(value.get("message"), str):
                    problems.append("tfruns.d/error.json: expected {\"message\": text, \"traceback\": [frames]}")
                elif not isinstance(value.get("traceback", []), list):
                    problems.append("tfruns.d/error.json: traceback is not an array of frames")

    _check_progress(props, metrics if isinstance(metrics, dict) else None, meta, problems)
    output_log = run_dir / "output.log"
    if output_log.is_file() and props.get("completed", "").strip() == "TRUE" and "output" not in props \
            and output_log.stat().st_size:
        problems.append("tfruns.d/properties/output: missing while output.log has the console output (rule 11: "
                        "tfruns's viewer shows properties/output)")
    source = meta / "source.tar.gz"
    script = props.get("script", "").strip()
    if source.exists():
        try:
            with tarfile.open(source, "r:gz") as tar:
                members = tar.getmembers()
                names = {m.name.rstrip("/") for m in members}
            if any(m.pax_headers for m in members) or _has_pax_block(source):
                problems.append("tfruns.d/source.tar.gz: has pax extended headers (rule 10: R's untar() warns "
                                "\"using pax extended headers\"; write GNU/ustar format with integer mtimes)")
            if script and f"source/{script}" not in names:
                problems.append(f"tfruns.d/source.tar.gz: has no source/{script} (rule 2: it must hold the "
                                f"script; it holds {', '.join(sorted(names)[:6]) or 'nothing'})")
        except (OSError, tarfile.TarError, EOFError) as exc:
            problems.append(f"tfruns.d/source.tar.gz: not a gzipped tar ({exc})")
    return problems


def check_runs_dir(runs_dir: str | os.PathLike) -> dict[str, list[str]]:
    """`check_run_dir()` for every run of a runs folder: {run folder name: violations} (invalid only)."""
    out = {}
    for run_dir in naming.list_run_dirs(runs_dir):
        found = check_run_dir(run_dir)
        if found:
            out[run_dir.name] = found
    return out


def _has_pax_block(path: Path) -> bool:
    """True when a tar member header is a pax header (type 'x' or 'g')."""
    import gzip

    try:
        data = gzip.decompress(path.read_bytes())
    except (OSError, EOFError, ValueError):
        return False
    offset = 0
    while offset + 512 <= len(data):
        header = data[offset:offset + 512]
        if not header.strip(b"\0"):
            return False
        if header[156:157] in (b"x", b"g"):
            return True
        try:
            size = int(header[124:136].strip(b"\0 ") or b"0", 8)
        except ValueError:
            return False
        offset += 512 + -(-size // 512) * 512
    return False


def _check_metric_names(metrics: dict, problems: list[str]) -> None:
    """Rule 7: tfruns charts every key but ``epoch``, and ``val_<m>`` only beside ``<m>``."""
    if "step" in metrics:
        problems.append("tfruns.d/metrics.json: has a 'step' array, which tfruns charts as a metric (rule 7: keep "
                        "the global step of each row under 'epoch', tfruns's x axis)")
    for key in metrics:
        if key.startswith("val_") and key[4:] not in metrics:
            problems.append(f"tfruns.d/metrics.json: {key!r} has no training {key[4:]!r} array, so tfruns never "
                            "charts it (rule 7: record the training metric beside the evaluation one)")


def _check_progress(props: dict[str, str], metrics: dict | None, meta: Path, problems: list[str]) -> None:
    """Rule 12 (progress in one unit) and the after-a-kill rules (end moves, rows are filled)."""
    rows = recorded = None
    if metrics:
        # tfruns's count (R/ls_runs.R run_record()): the non-null entries of the last array but 'epoch'.
        rows = completed_rows(metrics)
        recorded = max((sum(v is not None for v in vals) for k, vals in metrics.items()
                        if k != "epoch" and isinstance(vals, list)), default=0)
    done = props.get("completed", "").strip() == "TRUE"
    # tfruns shows the rows against 'steps' whenever that property exists (get_steps_unit()).
    unit = progress_column(props)[:-len("_completed")]
    planned = _number(props.get(unit, "").strip())
    # (Fewer rows than 'epochs' is truthful: an early-stopped run reads "2/3".)
    if unit == "steps" and done and rows is not None and planned is not None and rows != planned:
        problems.append(f"tfruns.d/properties/{unit}: {planned:g}, but tfruns counts {rows} metric rows: it shows "
                        f"\"{rows}/{planned:g}\" for this finished run (rule 12: count rows against 'epochs', "
                        "write no 'steps' property, keep the steps in 'max_steps'/'global_step')")
    if metrics is not None and recorded == 0 and (meta / "evaluation.json").is_file():
        problems.append("tfruns.d/metrics.json: every value is null although evaluation.json has the final "
                        "evaluation (rule 13: record each evaluation's row when it ends)")
    start, end = _number(props.get("start", "").strip()), _number(props.get("end", "").strip())
    if start is not None and end is not None and end == start and recorded:
        problems.append("tfruns.d/properties/end: equals start although metric rows were recorded (rule 13: move "
                        "end forward during the run)")
