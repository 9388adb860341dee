"""A cluster's shape and layout: which tasks it has, TensorFlow's `cluster` dict of their
addresses, and each task's `TF_CONFIG`. The local cluster (`local_cluster.py`, on free
loopback ports) and the Kubernetes manifest (`kubernetes.py`, on pod names) lay out the same
cluster from them."""
from __future__ import annotations

import dataclasses
import socket
from collections.abc import Callable

from tpuestimator.errors import ConfigError


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClusterShape:
    """How many tasks of each kind. `ps > 0` adds a `chief` (ParameterServerStrategy's
    coordinator); without it worker 0 is the chief (MultiWorkerMirroredStrategy)."""

    workers: int
    ps: int = 0
    evaluator: bool = False

    def __post_init__(self):
        if not isinstance(self.workers, int) or isinstance(self.workers, bool) or self.workers < 1:
            raise ConfigError("--workers", self.workers, "a whole number of training workers, at least 1")
        if not isinstance(self.ps, int) or isinstance(self.ps, bool) or self.ps < 0:
            raise ConfigError("--ps", self.ps, "a whole number of parameter servers, 0 or more")
        if not isinstance(self.evaluator, bool):
            raise ConfigError("--evaluator", self.evaluator, "true or false")

    def tasks(self) -> list[tuple[str, int]]:
        """(task type, index) of every task, the chief first."""
        out = [("chief", 0)] if self.ps else []
        out += [("worker", i) for i in range(self.workers)]
        out += [("ps", i) for i in range(self.ps)]
        return out + ([("evaluator", 0)] if self.evaluator else [])

    def check_strategy(self, strategy: str) -> None:
        """The `run.strategy` the cluster's roles need (ConfigError otherwise)."""
        if self.ps and strategy != "parameter_server":
            raise ConfigError("run.strategy", strategy,
                              "parameter_server with --ps (parameter servers serve ParameterServerStrategy); "
                              "drop --ps for multi_worker (synchronous all-reduce across the workers)")
        if not self.ps and strategy not in ("multi_worker", "auto"):
            raise ConfigError("run.strategy", strategy,
                              "multi_worker (or auto, which TF_CONFIG turns into multi_worker) for a cluster of "
                              "workers (MultiWorkerMirroredStrategy), or parameter_server with --ps M")


def cluster_layout(shape: ClusterShape, addresses: Callable[[str, int], str]) -> dict:
    """TensorFlow's `cluster` dict: {task type: [address, ...]} (the evaluator stays out,
    as TensorFlow expects of a side-car)."""
    cluster: dict = {}
    for kind, index in shape.tasks():
        if kind != "evaluator":
            cluster.setdefault(kind, []).append(addresses(kind, index))
    return cluster


def tf_configs(shape: ClusterShape, cluster: dict) -> list[tuple[str, int, dict]]:
    """(task type, index, TF_CONFIG dict) of every task."""
    return [(kind, index, {"cluster": cluster, "task": {"type": kind, "index": index}})
            for kind, index in shape.tasks()]


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """`n` distinct ports free on `host` right now (the OS picks them)."""
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()
