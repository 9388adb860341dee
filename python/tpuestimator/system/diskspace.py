"""A full disk, recognised and named: which folder, how much space is left, what to do.

TensorFlow reports a full disk as `ResourceExhaustedError ... No space left on device` (checkpoint
and SavedModel writes), Python as `OSError(ENOSPC)` and `shutil` as a `shutil.Error` listing
the failed copies. The code that writes checkpoints (checkpointing.py), exports (estimator.py)
and run records (job.py) wraps its writes in `translate_disk_full`, which turns any of them
into one `DiskFullError`. TensorFlow is never imported here.
"""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Iterator

from tpuestimator.errors import DiskFullError

_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
_FULL_TEXT = ("No space left on device", "Disk quota exceeded")


def is_disk_full(exc: BaseException | None) -> bool:
    """True when `exc` (or an exception it was raised from) reports a full disk or quota."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, DiskFullError):
            return True
        if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
            return True
        # TF's ResourceExhaustedError (also raised for out-of-memory: the text tells them apart)
        # and shutil.Error (a list of per-file failures) only say it in their message.
        if any(text in str(exc) for text in _FULL_TEXT):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def free_bytes(path: str | os.PathLike) -> int | None:
    """Free space on the filesystem holding `path` (or its nearest existing parent)."""
    path = os.path.abspath(os.fspath(path))
    while path and not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def human_size(n: int | None) -> str:
    if n is None:
        return "unknown"
    size = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} bytes"


def disk_full_error(path: str | os.PathLike, what: str, *, kept: str = "", fix: str = "",
                    last_good_checkpoint: str | None = None, saved: dict | None = None) -> DiskFullError:
    """A `DiskFullError` for `what` being written under `path`: the folder, the free space, what
    was kept and how to go on."""
    path = os.fspath(path)
    free = free_bytes(path)
    message = (f"No space left on the disk holding {path} while writing the {what} "
               f"({human_size(free)} free there). {kept + ' ' if kept else ''}"
               f"{fix or 'Free some space there (or write to a larger disk) and run the command again.'}")
    return DiskFullError(message.strip(), path=path, what=what, free_bytes=free,
                         last_good_checkpoint=last_good_checkpoint, saved=saved)


@contextlib.contextmanager
def translate_disk_full(path: str | os.PathLike, what: str, **kwargs) -> Iterator[None]:
    """Re-raises a full-disk error from the block as `disk_full_error(path, what, **kwargs)`;
    other errors pass unchanged. Clean up half-written files before this re-raise (inside)."""
    try:
        yield
    except DiskFullError:
        raise
    except Exception as exc:
        if not is_disk_full(exc):
            raise
        raise disk_full_error(path, what, **kwargs) from exc
