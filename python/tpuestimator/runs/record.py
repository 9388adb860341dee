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
The run's files, each written atomically under one lock, are `runs.run_folder.RunFolder`'s
(properties, source archive, artifacts); the properties a config determines are in
`runs.run_properties`; the metric rows in `runs.metric_rows`. This module is the life cycle
(create or attach, log, complete / fail / interrupt) and metrics.json.
Nothing here imports TensorFlow.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tpuestimator.runs.naming as naming
from tpuestimator.runs.archive import read_tar_members, tar_gz_bytes  # noqa: F401  (imported from here)
from tpuestimator.runs.metric_rows import MetricRows, planned_steps
from tpuestimator.runs.run_folder import OUTPUT_LOG, RunFolder  # noqa: F401  (OUTPUT_LOG imported from here)
from tpuestimator.runs.run_properties import (  # noqa: F401  (config_properties imported from here)
    config_properties,
    git_commit,
    is_int,
    script_name,
    tensorflow_version,
)
from tpuestimator.runs.values import EVAL_PREFIX, clean_evaluation, flatten_flags, metric_value, property_text
from tpuestimator.system.diskspace import is_disk_full
from tpuestimator.system.io import atomic_write_json

logger = logging.getLogger(__name__)

OWNER_FILE = "owner.json"
# Keys of a metrics dict that are the x axis, not metrics.
_STEP_NAMES = {"step", "global_step", "epoch"}
# Seconds between two `heartbeat()` writes of ``global_step`` and ``end`` (called at every loop
# boundary: a killed run shows its progress to within this). The two writes skip the fsync
# (atomic against a kill all the same): 8 ms measured on a loaded 2-core machine's overlay
# disk, so at most 0.8% of the wall time, whatever the loop length.
HEARTBEAT_S = 1.0


class RunRecorder(RunFolder):
    """Records one training run in tfruns's format. Make one with `RunRecorder.create()`.

    Attributes (and `RunFolder`'s: `run_dir`, `logs_dir`, `plots_dir`, `attached`):
      start: the start time, epoch seconds.
    """

    def __init__(self, run_dir: str | os.PathLike, *, start: float, planned_rows: int | None = None):
        super().__init__(run_dir)  # every file is written under its lock
        self.start = float(start)
        self.planned_rows = int(planned_rows) if planned_rows else None
        self._max_steps: int | None = None  # train.max_steps: where the padding rows' x ends
        self._rows = MetricRows()
        self._last_metrics_write = 0.0
        self._state = "running"
        self._last_beat = 0.0
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
                     "script": script_name(script), "type": "training", "context": "local"}
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
        rec.attached = True
        rec._initialize(config=config, flags=flags, script=script, properties=properties, existing=existing,
                        attached=True)
        return rec

    def _initialize(self, *, config, flags, script, properties, existing: set[str], attached: bool) -> None:
        """Writes the first records; properties named in `existing` are left as they are."""
        name = script_name(script)
        if attached:  # first the properties that make a crashed run valid
            if "start" not in existing:
                self.write_property("start", f"{self.start:.3f}")
            self.write_property("end", f"{max(self.start, time.time()):.3f}")
            self.write_property("completed", "FALSE")
        atomic_write_json(self.record_dir / OWNER_FILE, {"pid": os.getpid(), "host": socket.gethostname()})
        base: dict[str, Any] = {"type": "training", "context": "local", "script": name}
        base.update(config_properties(config))
        if is_int(base.get("max_steps")):
            self._max_steps = int(base["max_steps"])
        if self.planned_rows:  # tfruns counts metric rows against this (rule 12)
            base["epochs"] = self.planned_rows
        tf_version = tensorflow_version()
        if tf_version:
            base["tensorflow_version"] = tf_version
        commit = git_commit()
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
        self.write_source(script, name, config, keep_existing=attached and "script" in existing)
        for sub in ("train", "eval"):
            (self.logs_dir / sub).mkdir(parents=True, exist_ok=True)
        if self.planned_rows:
            self._write_metrics()
        logger.info("Recording run in %s", self.run_dir)

    def _touch_end(self, *, sync: bool = True) -> None:
        self.write_property("end", f"{time.time():.3f}", sync=sync)
        self._last_beat = time.monotonic()

    def heartbeat(self, step: int | None = None) -> None:
        """Writes the progress: ``global_step`` and ``end`` (at most every `HEARTBEAT_S` seconds),
        so that a run killed between two evaluations still shows how far and how long it ran.
        Called at every training loop boundary."""
        with self._lock:
            if self._state != "running" or time.monotonic() - self._last_beat < HEARTBEAT_S:
                return
            if step is not None:
                self.write_property("global_step", property_text(int(step)), sync=False)
            self._touch_end(sync=False)

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
                    self.write_property("global_step", property_text(int(step)))
                self._touch_end()

    def _metric_arrays(self) -> dict[str, list[float | None]]:
        count = len(self._rows)
        pad = max(self.planned_rows or 0, count) - count if self._state == "running" else 0
        return self._rows.arrays(pad=pad, pad_x=planned_steps(self._rows.steps, self._max_steps, pad))

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
                self.write_property("global_step", property_text(int(metric_value(step))))
            self._touch_end()
        return evaluation

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
                self.write_property("epochs", property_text(len(self._rows)))
            if plots:
                self._finish_plots()
            self.write_output()
            self._touch_end()
            if not self.attached:  # tfruns writes TRUE itself once the rest of the R script has run
                self.write_property("completed", "TRUE")
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
            self.write_output()
            self._touch_end()
            self.write_property("completed", "FALSE")
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
            self.write_property("interrupted", reason)
            if step is not None:
                self.write_property("global_step", property_text(int(step)))
            if len(self._rows):  # the rows since the last throttled write
                self._write_metrics()
            if plots:
                self._finish_plots()
            self.write_output()
            self._touch_end()
            self.write_property("completed", "FALSE")
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
