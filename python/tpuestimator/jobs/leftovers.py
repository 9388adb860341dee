"""Leftovers of a killed run: temp files and folders of our own naming, removed when a job starts.

A process killed mid-write (kill -9, OOM, power loss) leaves what its atomic writes had not
renamed yet: `tpuestimator.system.io` writes through ``.<name>.<8 random characters>.tmp`` files and
folders beside their target (exports: ``export/best/.500.k2j4x9ab.tmp/``), and TensorFlow writes
a checkpoint's shards into ``<prefix>_temp/`` (``ckpt-300_temp/``) before renaming them.
`remove_stale_temporaries` deletes exactly those names in the model dir and the export folders
(never anything else: a user's files there stay), and returns what it removed so the job can
log it. It runs when a job starts, in the process that holds the model-dir lock (one training
per model dir): a leftover's owner is gone by then. In a cluster that is the chief alone; the
other workers never clear the shared model dir, where the chief's own writes are under way.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Iterable

logger = logging.getLogger(__name__)

# tempfile.mkstemp/mkdtemp names: prefix + 8 characters of [a-z0-9_] + suffix (io.atomic_*).
ATOMIC_TEMP = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")
# TensorFlow's sharded checkpoint save: "<prefix>_temp" (optionally with a unique suffix).
CHECKPOINT_TEMP = re.compile(r"^ckpt-\d+_temp(_[0-9a-f]{32})?$")


def is_stale_temporary(name: str) -> bool:
    """Whether a file or folder name is one of our temporary names (module docstring)."""
    return bool(ATOMIC_TEMP.match(name) or CHECKPOINT_TEMP.match(name))


def remove_stale_temporaries(model_dir: str, export_dirs: Iterable[str] = ()) -> list[str]:
    """Removes our temporaries from `model_dir` and from each export folder and its exporters'
    folders (``<export dir>/<exporter>/``); returns the removed paths (each logged)."""
    folders = [model_dir]
    for base in export_dirs:
        folders.append(base)
        if os.path.isdir(base):
            folders.extend(os.path.join(base, d) for d in sorted(os.listdir(base))
                           if os.path.isdir(os.path.join(base, d)) and not is_stale_temporary(d))
    removed = []
    for folder in dict.fromkeys(folders):
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if not is_stale_temporary(name):
                continue
            path = os.path.join(folder, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.unlink(path)
                except OSError:
                    continue
            removed.append(path)
            logger.warning("removed %s, left by a run that was killed while writing it", path)
    return removed
