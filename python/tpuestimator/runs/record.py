"""`RunRecorder`: writes one training run as a tfruns run folder.

Layout (docs/RUN_FORMAT.md, which lists every rule and the test that checks it)::

    runs/2026-11-29T10-23-38Z/
      tfruns.d/properties/<name>   start, end, completed, type, context, script, steps, ...
      tfruns.d/flags.json          flat scalars (nested params flattened to dotted keys)
      tfruns.d/metrics.json        {"epoch": [global steps], "val_loss": [...], "loss": [...], ...}
                                   a row per training loop, val_ values at evaluations
                                   (runs/metric_rows.py), null-padded to the planned rows
      tfruns.d/evaluation.json     the final evaluation (finite values only)
      tfruns.d/error.json          only for a failed run
      tfruns.d/source.tar.gz       source/<script> (the config file)
      logs/train, logs/eval        TensorBoard event files
      plots/*.png                  metric curves
      <artifacts>                  e.g. the export, output.log (also in properties/output)

Crash safety: `create()` writes ``start``, ``end`` and ``completed=FALSE`` before anything
else, every file is replaced atomically, and ``end`` moves forward at every `log_metrics()`,
so a run killed with SIGKILL is still a valid, listable run (``completed`` FALSE).
``end`` also moves forward at every training loop (`heartbeat()`, at most every few seconds),
so a killed run's duration is right to within that.
Nothing here imports TensorFlow.

Over 400 lines on purpose: the writer's crash-safety rules (what is on disk after a kill at
any line) hold only as one class whose every write goes through the same atomic helpers and
lock; docs/RUN_FORMAT.md lists those rules one by one.
"""
from __future__ import annotations

import contextlib
import importlib.metadata
import io as _io
import json
import logging
import math
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

import tpuestimator.runs.naming as naming
from tpuestimator.runs.metric_rows import MetricRows
from tpuestimator.runs.values import (
    EVAL_PREFIX,
    clean_evaluation,
    flatten_flags,
    metric_value,
    property_text,
)
from tpuestimator.system.diskspace import is_disk_full
from tpuestimator.system.io import atomic_write_bytes, atomic_write_json, atomic_write_text, json_safe

logger = logging.getLogger(__name__)

OWNER_FILE = "owner.json"
_RESERVED = {naming.RECORD_DIR, "logs", "plots"}
# Keys of a metrics dict that are the x axis, not metrics.
_STEP_NAMES = {"step", "global_step", "epoch"}
# Seconds between two `heartbeat()` writes of ``global_step`` and ``end`` (called at every loop
# boundary: a killed run shows its progress to within this). The two writes skip the fsync
# (atomic against a kill all the same): 8 ms measured on a loaded 2-core machine's overlay
# disk, so at most 0.8% of the wall time, whatever the loop length.
HEARTBEAT_S = 1.0
# The run's console log (copied into properties/output, where tfruns's viewer shows it).
OUTPUT_LOG = "output.log"


def tar_gz_bytes(files: Mapping[str, bytes], *, mtime: float | None = None) -> bytes:
    """A gzipped tar of ``source/<name>`` members in GNU format with integer mtimes.

    Python's default (pax) format writes pax extended headers for float mtimes, and R's
    ``untar()`` warns "using pax extended headers" on every read (RUN_FORMAT.md, rule 10).
    """
    now = int(time.time() if mtime is None else mtime)
    buf = _io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.GNU_FORMAT) as tar:
        dirs = {"source"}
        for name in files:
            parts = name.split("/")[:-1]
            for i in range(len(parts)):
                dirs.add("/".join(["source", *parts[:i + 1]]))
        for folder in sorted(dirs):
            info = tarfile.TarInfo(folder)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, now
            tar.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo(f"source/{name}")
            info.size, info.mode, info.mtime = len(data), 0o644, now
            tar.addfile(info, _io.BytesIO(data))
    return buf.getvalue()


def read_tar_members(path: str | os.PathLike) -> dict[str, bytes]:
    """The files of a ``source.tar.gz`` as {name under source/: bytes} ({} when unreadable)."""
    out: dict[str, bytes] = {}
    try:
        with tarfile.open(path, "r:gz") as tar:
            for member in tar.getmembers():
                if member.isfile():
                    fh = tar.extractfile(member)
                    if fh is not None:
                        name = member.name[len("source/"):] if member.name.startswith("source/") else member.name
                        out[name] = fh.read()
    except (OSError, tarfile.TarError, EOFError):
        return {}
    return out


def _tensorflow_version() -> str | None:
    tf = sys.modules.get("tensorflow")
    version = getattr(tf, "__version__", None) if tf is not None else None
    if version:
        return str(version)
    for dist in ("tensorflow", "tensorflow-cpu", "tensorflow-tpu", "tensorflow-macos", "tf-nightly"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _git_commit(cwd: str | None = None) -> str | None:
    """HEAD of the git repository holding `cwd`, or None (not a repo, no commit, no git)."""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd or os.getcwd(), capture_output=True,
                              text=True, timeout=5, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and len(commit) >= 7 else None


def _get(mapping: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(mapping, Mapping) or key not in mapping:
            return None
        mapping = mapping[key]
    return mapping


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def config_properties(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The tfruns properties that a job configuration determines (typed ones only when valid)."""
    config = config or {}
    props: dict[str, Any] = {}
    train = _get(config, "train") or {}
    params = _get(config, "params") or {}
    # Not tfruns's ``steps``: tfruns shows ``steps_completed`` (the count of metric rows, one
    # per evaluation) against it, and "3/300" reads as an unfinished run (rule 12). The rows
    # are counted against ``epochs`` (the planned rows, written by the recorder) instead.
    steps = _get(train, "max_steps")
    if not _is_int(steps):
        steps = _get(train, "steps")
    if _is_int(steps):
        props["max_steps"] = steps
    if _is_int(_get(train, "batch_size")):
        props["batch_size"] = train["batch_size"]
    lr = params.get("learning_rate") if isinstance(params, Mapping) else None
    if lr is None:
        lr = _get(params, "optimizer", "learning_rate")
    if _is_number(lr):
        props["learning_rate"] = lr
    optimizer = params.get("optimizer") if isinstance(params, Mapping) else None
    if isinstance(optimizer, Mapping):
        optimizer = optimizer.get("name") or optimizer.get("type") or optimizer.get("class_name")
    if isinstance(optimizer, str):
        props["optimizer"] = optimizer
    if isinstance(params, Mapping):
        loss = params.get("loss_function", params.get("loss"))
        if isinstance(loss, str):
            props["loss_function"] = loss
    if isinstance(config.get("model"), str):
        props["model"] = config["model"]
    strategy = _get(config, "run", "strategy")
    if isinstance(strategy, str):
        props["strategy"] = strategy
    return props


class RunRecorder:
    """Records one training run in tfruns's format. Make one with `RunRecorder.create()`.

    Attributes:
      run_dir: the run folder (``runs/2026-11-29T10-23-38Z``).
      logs_dir: ``run_dir/logs``; TensorBoard events go in ``logs/train`` and ``logs/eval``.
      plots_dir: ``run_dir/plots``.
      start: the start time, epoch seconds.
    """

    def __init__(self, run_dir: str | os.PathLike, *, start: float, planned_rows: int | None = None):
        self.run_dir = Path(run_dir)
        self.record_dir = self.run_dir / naming.RECORD_DIR
        self.properties_dir = self.record_dir / "properties"
        self.logs_dir = self.run_dir / "logs"
        self.plots_dir = self.run_dir / "plots"
        self.start = float(start)
        self.planned_rows = int(planned_rows) if planned_rows else None
        self._max_steps: int | None = None  # train.max_steps: where the padding rows' x ends
        self._rows = MetricRows()
        self._last_metrics_write = 0.0
        self._state = "running"
        # Recording into tfruns's active run (attach()): tfruns owns `completed` (TRUE once the
        # whole R script has run) and `output` (its sink() writes the R console there).
        self._attached = False
        self._last_beat = 0.0
        self._lock = threading.RLock()
        self.flags: dict[str, Any] = {}

    # ------------------------------------------------------------------ creation
    @classmethod
    def create(cls, runs_dir: str | os.PathLike, *, config: Mapping[str, Any] | None,
               flags: Mapping[str, Any] | None, script: str | os.PathLike | None,
               planned_rows: int | None, properties: Mapping[str, Any] | None = None) -> RunRecorder:
        """Creates a new run folder named by its UTC start time and writes its first records.

        Args:
          runs_dir: the runs folder (created if needed).
          config: the resolved job configuration (a plain dict); gives the typed properties
            (steps, batch_size, learning_rate, optimizer, loss_function, model, strategy) and
            is archived in source.tar.gz.
          flags: the hyperparameters to compare runs by; flattened to dotted scalar keys.
          script: the config file that was run. When it is an existing file it is archived as
            ``source/<basename>``; otherwise `config` is written under that name (a dict
            config from R gets ``config.yaml``).
          planned_rows: how many metric rows the run will log (`metric_rows.planned_row_count`);
            metric arrays are padded with null to this length (None: arrays grow as rows come).
          properties: extra properties, written last (they win over derived ones).

        Returns:
          The recorder; ``start``, ``end`` and ``completed=FALSE`` are already on disk.
        """
        run_dir, start = naming.create_run_dir(runs_dir)
        rec = cls(run_dir, start=start, planned_rows=planned_rows)
        try:
            # tfruns.d/ appears at once with the properties that make a valid run (a crash at any
            # later point leaves a listable run): built in a hidden folder, then renamed.
            tmp = run_dir / f".{naming.RECORD_DIR}.tmp"
            (tmp / "properties").mkdir(parents=True)
            first = {"start": f"{start:.3f}", "end": f"{start:.3f}", "completed": "FALSE",
                     "script": _script_name(script), "type": "training", "context": "local"}
            for name, text in first.items():
                (tmp / "properties" / name).write_text(text + "\n", encoding="utf-8")
            os.rename(tmp, rec.record_dir)
            rec._initialize(config=config, flags=flags, script=script, properties=properties,
                            existing={"start", "end", "completed"}, attached=False)
        except Exception:  # a full disk, say: no half-made run folder is left to list
            shutil.rmtree(run_dir, ignore_errors=True)
            raise
        return rec

    @classmethod
    def attach(cls, run_dir: str | os.PathLike, *, config: Mapping[str, Any] | None,
               flags: Mapping[str, Any] | None, script: str | os.PathLike | None,
               planned_rows: int | None, properties: Mapping[str, Any] | None = None) -> RunRecorder:
        """Records into an existing run folder (tfruns's active run, ``tfruns::run_dir()`` from R).

        Same arguments as `create()`. What tfruns already wrote there wins: existing
        properties (``start``, ``script``, ...) are kept, existing flags keep their values (ours
        are added beside them) and an existing ``source.tar.gz`` (the R script) is kept.
        """
        run_dir = Path(run_dir)
        props_dir = run_dir / naming.RECORD_DIR / "properties"
        props_dir.mkdir(parents=True, exist_ok=True)
        existing = {p.name for p in props_dir.iterdir() if p.is_file() and not p.name.startswith(".")}
        start = None
        if "start" in existing:
            try:
                start = float((props_dir / "start").read_text().strip())
            except (OSError, ValueError):
                start = None
        if start is None:
            existing.discard("start")
            start = time.time()
        rec = cls(run_dir, start=start, planned_rows=planned_rows)
        rec._attached = True
        rec._initialize(config=config, flags=flags, script=script, properties=properties, existing=existing,
                        attached=True)
        return rec

    def _initialize(self, *, config, flags, script, properties, existing: set[str], attached: bool) -> None:
        """Writes the first records; properties named in `existing` are left as they are."""
        script_name = _script_name(script)
        if attached:  # first the properties that make a crashed run valid
            if "start" not in existing:
                self._write_property("start", f"{self.start:.3f}")
            self._write_property("end", f"{max(self.start, time.time()):.3f}")
            self._write_property("completed", "FALSE")
        atomic_write_json(self.record_dir / OWNER_FILE, {"pid": os.getpid(), "host": socket.gethostname()})
        base: dict[str, Any] = {"type": "training", "context": "local", "script": script_name}
        base.update(config_properties(config))
        if _is_int(base.get("max_steps")):
            self._max_steps = int(base["max_steps"])
        if self.planned_rows:  # tfruns counts metric rows against this (rule 12)
            base["epochs"] = self.planned_rows
        tf_version = _tensorflow_version()
        if tf_version:
            base["tensorflow_version"] = tf_version
        commit = _git_commit()
        if commit:
            base["git_commit"] = commit
        flat, dropped = flatten_flags(flags)
        if dropped:
            base["flags_dropped"] = ", ".join(f"{k} ({why})" for k, why in dropped.items())
            logger.info("Flags left out of flags.json (no value): %s", base["flags_dropped"])
        base.update(properties or {})
        self.set_properties(**{k: v for k, v in base.items() if k not in existing})
        flags_path = self.record_dir / "flags.json"
        if flags_path.is_file():
            try:
                old = json.loads(flags_path.read_text(encoding="utf-8"))
            except ValueError:
                old = None
            if isinstance(old, dict):
                old_flat, _ = flatten_flags(old)
                flat = {**flat, **old_flat}
        atomic_write_json(flags_path, flat)
        self.flags = flat
        # Inside tfruns's training_run() its source.tar.gz holds the R script: ours is merged in.
        self._write_source(script, script_name, config, keep_existing=attached and "script" in existing)
        for sub in ("train", "eval"):
            (self.logs_dir / sub).mkdir(parents=True, exist_ok=True)
        if self.planned_rows:
            self._write_metrics()
        logger.info("Recording run in %s", self.run_dir)

    def _write_source(self, script: str | os.PathLike | None, script_name: str,
                      config: Mapping[str, Any] | None, keep_existing: bool = False) -> None:
        files: dict[str, bytes] = {}
        archive = self.record_dir / "source.tar.gz"
        existing = read_tar_members(archive) if keep_existing and archive.is_file() else {}
        path = Path(str(script)) if script else None
        if path is not None and path.is_file():
            files[script_name] = path.read_bytes()
        else:
            cfg = json.loads(json.dumps(json_safe(dict(config or {})), default=str))
            if script_name.endswith(".json"):
                files[script_name] = (json.dumps(cfg, indent=2) + "\n").encode()
            else:
                files[script_name] = yaml.safe_dump(cfg, sort_keys=False).encode()
        if config and "resolved_config.yaml" not in files:
            cfg = json.loads(json.dumps(json_safe(dict(config)), default=str))
            files["resolved_config.yaml"] = yaml.safe_dump(cfg, sort_keys=False).encode()
        atomic_write_bytes(archive, tar_gz_bytes({**files, **existing}))

    # ------------------------------------------------------------------ properties
    @property
    def name(self) -> str:
        return self.run_dir.name

    @property
    def train_logs_dir(self) -> Path:
        return self.logs_dir / "train"

    @property
    def eval_logs_dir(self) -> Path:
        return self.logs_dir / "eval"

    def _write_property(self, name: str, text: str, *, sync: bool = True) -> None:
        # One value per file, ending with a newline as R's writeLines() writes it (rule 9).
        atomic_write_text(self.properties_dir / name, text if text.endswith("\n") else text + "\n", sync=sync)

    def set_properties(self, **kv: Any) -> None:
        """Writes properties, one file each (None values are skipped; booleans as TRUE/FALSE).

        Typed tfruns properties (``steps``, ``batch_size``, ``samples``, ``epochs``,
        ``validation_samples`` integers; ``learning_rate`` a number) are skipped with a
        warning when the value does not fit, because R would read them as NA.
        """
        with self._lock:
            for key, value in kv.items():
                if value is None:
                    continue
                name = str(key).replace(os.sep, "_").replace("/", "_").strip(". ") or "property"
                if name in ("steps", "batch_size", "samples", "epochs", "validation_samples") and not (
                        _is_int(value) or (_is_number(value) and float(value).is_integer())):
                    logger.warning("Property %s=%r is not an integer; not written.", name, value)
                    continue
                if name == "learning_rate" and not _is_number(value):
                    logger.warning("Property learning_rate=%r is not a finite number; not written.", value)
                    continue
                self._write_property(name, property_text(value))

    def _touch_end(self, *, sync: bool = True) -> None:
        self._write_property("end", f"{time.time():.3f}", sync=sync)
        self._last_beat = time.monotonic()

    def heartbeat(self, step: int | None = None) -> None:
        """Writes the progress: ``global_step`` and ``end`` (at most every `HEARTBEAT_S` seconds),
        so that a run killed between two evaluations still shows how far and how long it ran.
        Called at every training loop boundary."""
        with self._lock:
            if self._state != "running" or time.monotonic() - self._last_beat < HEARTBEAT_S:
                return
            if step is not None:
                self._write_property("global_step", property_text(int(step)), sync=False)
            self._touch_end(sync=False)

    def _write_output(self) -> None:
        """Copies the run's console log into ``properties/output`` (tfruns's Output tab).

        Not inside tfruns's ``training_run()``: there that file is the open target of tfruns's
        ``sink()`` of the R console (R/training_run.R, do_training_run()); replacing it would
        lose the R console, and our log stays in the run as ``output.log``."""
        if self._attached:
            return
        log = self.run_dir / OUTPUT_LOG
        if log.is_file():
            try:
                text = log.read_text(encoding="utf-8", errors="replace")
            except OSError:
                return
            if text.strip():
                self._write_property("output", text)

    # ------------------------------------------------------------------ metrics
    def log_metrics(self, step: int | float | None, metrics: Mapping[str, Any] | None = None, *,
                    eval_metrics: Mapping[str, Any] | None = None) -> None:
        """Records one training loop's metrics, or an evaluation's, in metrics.json.

        Args:
          step: the global step of this row (the ``epoch`` array: the charts' x axis, which
            tfruns does not chart as a metric).
          metrics: training metrics, recorded under their own names (``loss``).
          eval_metrics: evaluation metrics, recorded as ``val_<name>`` so tfruns charts them
            beside the training ones (names already starting with ``val_`` are kept). With
            them, the row at the same step (the loop the evaluation followed) gets the values;
            without, a new row starts (`metric_rows.MetricRows` keeps the file's size bounded).

        NaN and Inf become null. The file is rewritten atomically at once after an evaluation,
        and at most every `HEARTBEAT_S` seconds after a training loop (at the end in any case).
        """
        row: dict[str, float | None] = {}
        for key, value in (metrics or {}).items():
            if str(key) not in _STEP_NAMES:
                row[str(key)] = metric_value(value)
        for key, value in (eval_metrics or {}).items():
            key = str(key)
            if key in _STEP_NAMES:
                continue
            row[key if key.startswith(EVAL_PREFIX) else EVAL_PREFIX + key] = metric_value(value)
        with self._lock:
            self._rows.add(metric_value(step) if step is not None else None, row, new_loop=not eval_metrics)
            if eval_metrics or time.monotonic() - self._last_metrics_write >= HEARTBEAT_S:
                self._write_metrics()
                self._last_metrics_write = time.monotonic()
                if step is not None and metric_value(step) is not None:
                    self._write_property("global_step", property_text(int(step)))
                self._touch_end()

    def _metric_arrays(self) -> dict[str, list[float | None]]:
        count = len(self._rows)
        pad = max(self.planned_rows or 0, count) - count if self._state == "running" else 0
        return self._rows.arrays(pad=pad, pad_x=self._planned_x(pad))

    def _planned_x(self, count: int) -> list[int | None]:
        """The x values of the `count` rows not recorded yet: evenly spaced global steps from the
        last recorded one up to ``train.max_steps`` (null when that is unknown).

        tfruns's chart (inst/views/components/metrics_charts.html, MetricsCharts) sets the x axis
        maximum to the LAST ``epoch`` value and uses the ``epoch`` values as tick values, so a
        null there would be handed to c3 as an axis bound and as ticks. keras never writes one
        (without an ``epoch`` key tfruns uses 1..n, padding rows included), so neither do we:
        the axis of a running or stopped run spans the planned steps, as keras's spans the
        planned epochs. The metric values of those rows stay null."""
        if count <= 0:
            return []
        last = next((s for s in reversed(self._rows.steps) if s is not None), 0) or 0
        if not self._max_steps or self._max_steps <= last:
            return [None] * count
        span = self._max_steps - last
        return [int(round(last + span * k / count)) for k in range(1, count + 1)]

    def _write_metrics(self) -> None:
        atomic_write_json(self.record_dir / "metrics.json", self._metric_arrays(), indent=None)

    @property
    def metrics(self) -> dict[str, list[float | None]]:
        """The metric arrays as written to metrics.json."""
        with self._lock:
            return self._metric_arrays()

    def write_evaluation(self, metrics: Mapping[str, Any]) -> dict[str, Any]:
        """Writes evaluation.json: the final evaluation, finite values only.

        A ``global_step`` entry becomes the ``global_step`` property instead.

        Returns:
          The object written.
        """
        metrics = dict(metrics or {})
        step = metrics.pop("global_step", None)
        evaluation = clean_evaluation(metrics)
        with self._lock:
            atomic_write_json(self.record_dir / "evaluation.json", evaluation)
            if metric_value(step) is not None:
                self._write_property("global_step", property_text(int(metric_value(step))))
            self._touch_end()
        return evaluation

    # ------------------------------------------------------------------ artifacts
    def add_artifact(self, src: str | os.PathLike, name: str | None = None) -> Path:
        """Copies a file or folder into the run folder (replacing one of the same name).

        Args:
          src: the file or folder to copy (e.g. the export, ``output.log``).
          name: its name in the run folder; default the source's name. May hold ``/``.

        Returns:
          The copy's path.

        Raises:
          FileNotFoundError: `src` does not exist.
          ValueError: `name` leaves the run folder or is a reserved folder.
        """
        src = Path(src)
        if not src.exists():
            raise FileNotFoundError(f"add_artifact: {src} does not exist; pass an existing file or folder.")
        rel = Path(name or src.name)
        if rel.is_absolute() or ".." in rel.parts or not rel.parts or rel.parts[0] in _RESERVED:
            raise ValueError(f"add_artifact: name={str(rel)!r} is not allowed. Expected a relative path inside "
                             f"the run folder, not starting with {', '.join(sorted(_RESERVED))}.")
        dest = self.run_dir / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
            try:
                shutil.copytree(src, tmp, dirs_exist_ok=True)
                old = None
                if dest.exists():
                    old = dest.with_name(f".{dest.name}.old.{os.getpid()}")
                    os.replace(dest, old)
                os.replace(tmp, dest)
                if old is not None:
                    shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink()
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        else:
            fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
            os.close(fd)
            try:
                shutil.copyfile(src, tmp_name)
                if dest.is_dir():
                    shutil.rmtree(dest)
                os.replace(tmp_name, dest)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp_name)
                raise
        return dest

    def write_plots(self) -> list[Path]:
        """Draws the metric curves (``loss`` with ``val_loss``, ...) as PNG files in plots/."""
        from tpuestimator.runs.plots import write_metric_pngs

        with self._lock:
            arrays = self._metric_arrays()
        return write_metric_pngs(arrays, self.plots_dir)

    # ------------------------------------------------------------------ ending
    def _finish_plots(self) -> None:
        if not len(self._rows):
            return
        try:
            self.write_plots()
        except Exception as exc:  # a plot must never fail a run
            if is_disk_full(exc):  # said once by the job's DiskFullError: no traceback here
                logger.warning("Could not draw the metric plots of %s: its disk is full", self.run_dir)
                return
            logger.warning("Could not draw the metric plots of %s", self.run_dir, exc_info=True)

    def complete(self, *, plots: bool = True) -> None:
        """Marks the run completed (``completed=TRUE``, ``end`` now); draws the plots by default."""
        with self._lock:
            if self._state != "running":
                logger.warning("Run %s already ended (%s); complete() ignored.", self.name, self._state)
                return
            self._state = "completed"  # no padding rows from here on
            if len(self._rows):
                self._write_metrics()
                # a finished run reads complete (rule 12): its rows are all it will have, also
                # when it resumed from a checkpoint or stopped early
                self._write_property("epochs", property_text(len(self._rows)))
            if plots:
                self._finish_plots()
            self._write_output()
            self._touch_end()
            if not self._attached:  # tfruns writes TRUE itself once the rest of the R script has run
                self._write_property("completed", "TRUE")
            self._state = "completed"

    def fail(self, exc: BaseException, *, plots: bool = True) -> None:
        """Marks the run failed: writes error.json, ``completed=FALSE`` and ``end``.

        Args:
          exc: the exception that ended the run; its message and traceback frames are recorded.
        """
        message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        frames = [frame.rstrip("\n") for frame in traceback.format_tb(exc.__traceback__)]
        with self._lock:
            if self._state != "running":
                logger.warning("Run %s already ended (%s); fail() ignored.", self.name, self._state)
                return
            atomic_write_json(self.record_dir / "error.json", {"message": message, "traceback": frames})
            if len(self._rows):  # the rows since the last throttled write
                self._write_metrics()
            if plots:
                self._finish_plots()
            self._write_output()
            self._touch_end()
            self._write_property("completed", "FALSE")
            self._state = "failed"

    def interrupt(self, reason: str, *, step: int | None = None, plots: bool = True) -> None:
        """Marks the run interrupted (SIGTERM/SIGINT, an interrupt from R): the ``interrupted``
        property says why and where a rerun resumes, ``completed=FALSE``, no error.json (the
        run did not fail: a rerun continues it). Readers show the status ``interrupted``.

        Args:
          reason: one line, e.g. "SIGTERM at global step 120; checkpoint .../ckpt-120 saved".
          step: the global step reached, written as ``global_step`` when given.
        """
        with self._lock:
            if self._state != "running":
                logger.warning("Run %s already ended (%s); interrupt() ignored.", self.name, self._state)
                return
            self._write_property("interrupted", reason)
            if step is not None:
                self._write_property("global_step", property_text(int(step)))
            if len(self._rows):  # the rows since the last throttled write
                self._write_metrics()
            if plots:
                self._finish_plots()
            self._write_output()
            self._touch_end()
            self._write_property("completed", "FALSE")
            self._state = "interrupted"

    @property
    def state(self) -> str:
        """``running``, ``completed``, ``failed`` or ``interrupted``."""
        return self._state

    def __enter__(self) -> RunRecorder:
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is not None:
            self.fail(exc)
        elif self._state == "running":
            self.complete()
        return False

    def __repr__(self) -> str:
        return f"RunRecorder({str(self.run_dir)!r}, state={self._state!r})"


def _script_name(script: str | os.PathLike | None) -> str:
    """The ``script`` property: the config file's name (``config.yaml`` for a dict config)."""
    name = Path(str(script)).name if script else ""
    return name if name and name not in (".", "..") else "config.yaml"
