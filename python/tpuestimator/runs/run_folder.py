"""`RunFolder`: the files of one run folder, each written atomically: its properties (one
file per value, as tfruns reads them), its source archive, its console log's copy and its
artifacts. `runs.record.RunRecorder` adds a run's life cycle and metrics on top.

Nothing here imports TensorFlow.
"""
from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tpuestimator.runs.naming as naming
from tpuestimator.runs.archive import read_tar_members, source_files, tar_gz_bytes
from tpuestimator.runs.run_properties import typed_property_problem
from tpuestimator.runs.values import property_text
from tpuestimator.system.io import atomic_write_bytes, atomic_write_text

logger = logging.getLogger(__name__)

# Folders of a run that an artifact may not replace.
_RESERVED = {naming.RECORD_DIR, "logs", "plots"}
# The run's console log (copied into properties/output, where tfruns's viewer shows it).
OUTPUT_LOG = "output.log"


class RunFolder:
    """One run folder's files.

    Attributes:
      run_dir: the run folder (``runs/2026-11-29T10-23-38Z``).
      logs_dir: ``run_dir/logs``; TensorBoard events go in ``logs/train`` and ``logs/eval``.
      plots_dir: ``run_dir/plots``.
      attached: recording into tfruns's active run (`RunRecorder.attach`): tfruns owns
        ``completed`` (TRUE once the whole R script has run) and ``output`` (its sink() writes
        the R console there).
    """

    def __init__(self, run_dir: str | os.PathLike, *, attached: bool = False):
        self.run_dir = Path(run_dir)
        self.record_dir = self.run_dir / naming.RECORD_DIR
        self.properties_dir = self.record_dir / "properties"
        self.logs_dir = self.run_dir / "logs"
        self.plots_dir = self.run_dir / "plots"
        self.attached = attached
        self._lock = threading.RLock()

    @property
    def name(self) -> str:
        return self.run_dir.name

    @property
    def train_logs_dir(self) -> Path:
        return self.logs_dir / "train"

    @property
    def eval_logs_dir(self) -> Path:
        return self.logs_dir / "eval"

    def write_property(self, name: str, text: str, *, sync: bool = True) -> None:
        """One property's file, its value as given (see `set_properties` for typed values)."""
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
                problem = typed_property_problem(name, value)
                if problem:
                    logger.warning("Property %s=%r %s; not written.", name, value, problem)
                    continue
                self.write_property(name, property_text(value))

    def write_source(self, script: str | os.PathLike | None, script_name: str,
                     config: Mapping[str, Any] | None, keep_existing: bool = False) -> None:
        """``source.tar.gz`` (`runs.archive.source_files`); with `keep_existing` the members an
        archive already there holds win (tfruns's R script, inside its training_run())."""
        archive = self.record_dir / "source.tar.gz"
        existing = read_tar_members(archive) if keep_existing and archive.is_file() else {}
        atomic_write_bytes(archive, tar_gz_bytes({**source_files(script, script_name, config), **existing}))

    def write_output(self) -> None:
        """Copies the run's console log into ``properties/output`` (tfruns's Output tab).

        Not inside tfruns's ``training_run()``: there that file is the open target of tfruns's
        ``sink()`` of the R console (R/training_run.R, do_training_run()); replacing it would
        lose the R console, and our log stays in the run as ``output.log``."""
        if self.attached:
            return
        log = self.run_dir / OUTPUT_LOG
        if log.is_file():
            try:
                text = log.read_text(encoding="utf-8", errors="replace")
            except OSError:
                return
            if text.strip():
                self.write_property("output", text)

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
