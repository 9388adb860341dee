"""Atomic file and folder writes: a crash never leaves a half-written file behind.

Every JSON file, run record and export that tpuestimator writes goes through here.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, sync: bool = True) -> None:
    """Writes `data` to `path` through a temp file in the same folder, fsync and a rename.

    `sync=False` skips the fsync (a few ms on slow disks): the rename is still atomic against
    the process being killed, only a power loss may lose the new content (for frequent,
    superseded writes such as a run's progress)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600 files; keep the usual permissions
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str, *, sync: bool = True) -> None:
    """Writes `text` (UTF-8) to `path` atomically (see `atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode("utf-8"), sync=sync)


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Read once at import: os.umask can only be read by setting it, which is not thread-safe.
_UMASK = _read_umask()


def json_safe(value: Any) -> Any:
    """Replaces NaN and +-Inf with None (JSON null) at any depth; numpy scalars become Python ones.

    Python's json writes NaN/Infinity, which R's jsonlite (and the JSON standard) reject.
    """
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def atomic_write_json(path: str | os.PathLike, data: Any, *, indent: int | None = 2) -> None:
    """Writes strict JSON (no NaN/Infinity) atomically."""
    atomic_write_text(path, json.dumps(json_safe(data), indent=indent, allow_nan=False) + "\n")


@contextlib.contextmanager
def atomic_directory(final: str | os.PathLike) -> Iterator[Path]:
    """Yields a temp folder beside `final`; renames it to `final` only if the block succeeds.

    Raises:
      FileExistsError: when `final` already exists (exports are never overwritten).
    """
    final = Path(final)
    if final.exists():
        raise FileExistsError(f"{final} already exists; refusing to overwrite it")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    try:
        os.chmod(tmp, 0o777 & ~_UMASK)  # mkdtemp makes 0700 folders; TF Serving may run as another user
        yield tmp
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
