"""Whether the process that wrote a lock or a run record still runs.

A model-dir lock (`model_dir_lock`) and a run record's owner file (`runs/reading`) both name
their process by host, pid and start time; a pid alone is not enough, as Linux reuses pids.
"""
from __future__ import annotations

import os
import socket
from pathlib import Path


def process_start_time(pid: int) -> float | None:
    """Epoch seconds at which process `pid` started (Linux /proc), None if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])
        btime = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                     if line.startswith("btime"))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def process_alive(host, pid, started) -> bool:
    """Whether process `pid` on `host` (this host only: False elsewhere) still runs and is the
    one that started at epoch seconds `started` (None: not checked)."""
    if host != socket.gethostname() or not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, owned by another user
    now_started = process_start_time(pid)
    # A pid reused by a process that started after the owner wrote its file is not the owner.
    return now_started is None or not isinstance(started, (int, float)) or now_started <= started + 2.0
