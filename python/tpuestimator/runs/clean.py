"""Deleting runs the way tfruns does: `clean_runs()` moves them to ``<runs_dir>/archive/``."""
from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import tpuestimator.runs.naming as naming
from tpuestimator.runs.reading import resolve_run

logger = logging.getLogger(__name__)


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
