"""Run folder names: the UTC start time, ``%Y-%m-%dT%H-%M-%SZ``, exactly as tfruns names them.

tfruns's ``latest_run()`` and ``ls_runs(latest_n=)`` sort runs by folder NAME, so names must
sort in start order. A name with fractional seconds (``...T10-23-38.123Z``, which tfruns
makes for tuning runs) sorts BEFORE the plain name of the same second ('.' < 'Z' in every
collation R uses), so a clash is not solved with fractional seconds: like tfruns
(``unique_run_dir()``), a second run started in an already-used second waits for the next free
second and takes a plain name. The folder is claimed with ``os.mkdir``, which is atomic, so
processes racing for the same second each get their own folder.

Both forms are recognised when reading.
"""
from __future__ import annotations

import datetime as _dt
import os
import re
import time
from pathlib import Path

RUN_NAME_FORMAT = "%Y-%m-%dT%H-%M-%SZ"
RUN_NAME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(\.\d+)?Z$")
RECORD_DIR = "tfruns.d"
ARCHIVE_DIR = "archive"

# A run creation that has waited this long for a free second gives up (something else is
# creating a run every second in the same folder, or the clock is stuck).
_MAX_WAIT_S = 120.0


def format_run_name(t: float) -> str:
    """The folder name of a run started at epoch seconds `t` (UTC, whole seconds)."""
    return _dt.datetime.fromtimestamp(int(t), tz=_dt.timezone.utc).strftime(RUN_NAME_FORMAT)


def parse_run_name(name: str) -> float | None:
    """Epoch seconds encoded in a run folder name, or None when the name is not one."""
    if not RUN_NAME_RE.match(name):
        return None
    base, _, frac = name[:-1].partition(".")
    stamp = _dt.datetime.strptime(base, "%Y-%m-%dT%H-%M-%S").replace(tzinfo=_dt.timezone.utc)
    return stamp.timestamp() + (float("0." + frac) if frac else 0.0)


def is_run_name(name: str) -> bool:
    """True for names in tfruns's format (with or without fractional seconds)."""
    return RUN_NAME_RE.match(name) is not None


def is_run_dir(path: str | os.PathLike) -> bool:
    """A run is any folder holding a ``tfruns.d/`` folder (tfruns's own test)."""
    return (Path(path) / RECORD_DIR).is_dir()


def create_run_dir(runs_dir: str | os.PathLike) -> tuple[Path, float]:
    """Creates a new, uniquely named run folder under `runs_dir`.

    Returns:
      (the run folder, its start time in epoch seconds). The name is `format_run_name(start)`.

    Raises:
      TimeoutError: when no free second was found within two minutes.
    """
    runs_dir = Path(runs_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + _MAX_WAIT_S
    while True:
        now = time.time()
        candidate = runs_dir / format_run_name(now)
        try:
            os.mkdir(candidate)
            return candidate, now
        except FileExistsError:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"could not create a run folder in {runs_dir}: every second for "
                    f"{_MAX_WAIT_S:.0f} s already had a run. Use another runs folder (run.runs_dir)."
                ) from None
            # Sleep to just past the next second boundary, then try that second's name.
            time.sleep(max(0.005, 1.0 - (time.time() % 1.0)) + 0.002)


def list_run_dirs(runs_dir: str | os.PathLike) -> list[Path]:
    """Run folders under `runs_dir` sorted by name, oldest first (tfruns's order)."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return []
    found = [p for p in runs_dir.iterdir() if p.name != ARCHIVE_DIR and is_run_dir(p)]
    return sorted(found, key=lambda p: p.name)
