"""A small local-cluster launcher for the distributed tests: each task of a TF_CONFIG cluster
is a `python -m tpuestimator train` process on 127.0.0.1 with its own TF_CONFIG.

(The `tpuestimator cluster` command is the user's launcher; the tests keep their own so that
they check `tpuestimator train`'s behaviour in each role, and nothing of the launcher.)
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1 (all held open together, so no two are the same)."""
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def cluster_spec(*, workers: int, ps: int = 0, chief: bool = True, evaluator: bool = False) -> dict:
    """TF_CONFIG's `cluster` on free loopback ports (an `evaluator` listed as TensorFlow's
    convention has it, though it serves nothing)."""
    ports = iter(free_ports(workers + ps + int(chief) + int(evaluator)))
    spec = {"worker": [f"127.0.0.1:{next(ports)}" for _ in range(workers)]}
    if evaluator:
        spec["evaluator"] = [f"127.0.0.1:{next(ports)}"]
    if ps:
        spec["ps"] = [f"127.0.0.1:{next(ports)}" for _ in range(ps)]
    if chief:
        spec["chief"] = [f"127.0.0.1:{next(ports)}"]
    return spec


class LocalCluster:
    """Starts one process per task (`tasks`: [(type, index)]), each running `args` after
    `python -m tpuestimator`, logs in `log_dir/<type>-<index>.log`; `commands` gives a task
    ("chief-0") another command line after `python`. Always `stop()` it."""

    def __init__(self, cluster: dict, tasks, args: list[str], *, log_dir: Path, env: dict | None = None,
                 commands: dict | None = None):
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}
        log_dir.mkdir(parents=True, exist_ok=True)
        base = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "python"), str(REPO / "tests" / "python"),
                                                             os.environ.get("PYTHONPATH", "")]),
                    TF_CPP_MIN_LOG_LEVEL="2")
        base.update(env or {})
        for kind, index in tasks:
            name = f"{kind}-{index}"
            task_env = dict(base, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}}))
            self.logs[name] = log_dir / f"{name}.log"
            with open(self.logs[name], "wb") as log:
                argv = (commands or {}).get(name) or ["-m", "tpuestimator", *args]
                self.procs[name] = subprocess.Popen([sys.executable, *argv], env=task_env,
                                                    stdout=log, stderr=subprocess.STDOUT, cwd=str(log_dir))

    def wait(self, name: str, timeout: float) -> int:
        return self.procs[name].wait(timeout=timeout)

    def wait_all(self, timeout: float) -> dict[str, int]:
        """{task: exit code} once every process has ended; raises TimeoutError naming the rest."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(p.poll() is not None for p in self.procs.values()):
                return {name: p.returncode for name, p in self.procs.items()}
            time.sleep(0.5)
        raise TimeoutError(f"still running after {timeout} s: {[n for n, p in self.procs.items() if p.poll() is None]}")

    def log(self, name: str) -> str:
        return self.logs[name].read_text(errors="replace")

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
