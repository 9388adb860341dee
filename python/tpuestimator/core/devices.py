"""Choosing the `tf.distribute` strategy for `run.strategy` (CPU, GPU, TPU, multi-worker).

No home-made cluster code: every kind maps onto a strategy TensorFlow ships.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import TYPE_CHECKING

from tpuestimator.core import workarounds
from tpuestimator.core.cluster_task import (
    cluster_spec,
    read_tf_config,
    task_role,
    tf_config_task,
    training_cluster_resolver,
)
from tpuestimator.errors import ConfigError, TPUUnavailableError
from tpuestimator.models import partitioning

if TYPE_CHECKING:
    from tpuestimator.core.run_config import RunConfig

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeviceInfo:
    """What the job runs on. `kind` is 'cpu', 'gpu' or 'tpu'."""

    strategy_name: str
    kind: str
    num_replicas: int
    devices: tuple[str, ...]
    topology: str | None = None

    def as_properties(self) -> dict:
        return {"strategy": self.strategy_name, "num_replicas": self.num_replicas, "device": self.kind,
                "devices": ",".join(self.devices), **({"tpu_topology": self.topology} if self.topology else {})}


def split_cpu(num_devices: int) -> None:
    """Splits the physical CPU into `num_devices` logical devices (rehearses an N-core TPU).

    Must run before TensorFlow initialises its devices; a later call with the same count is
    a no-op, a different count is an error naming `run.num_cpu_devices`.
    """
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    current = tf.config.get_logical_device_configuration(cpu)
    if current and len(current) == num_devices:
        return
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * num_devices)
    except RuntimeError:
        have = len(tf.config.list_logical_devices("CPU"))
        if have == num_devices:
            return
        raise ConfigError("run.num_cpu_devices", num_devices,
                          f"the count this process already initialised ({have}); TensorFlow fixes logical "
                          "devices at start-up, so run it in a fresh process") from None


# One strategy per kind and device set per process. TensorFlow's collective all-reduce keys
# are per strategy object: two MirroredStrategy objects over the same devices in one process
# (a second Estimator, a second tpu_train() in an R session) can collide and abort with
# "Shape mismatch in the collective instance". Reusing the strategy avoids that.
_STRATEGIES: dict = {}


def make_strategy(run: RunConfig):
    """Builds (or reuses) the strategy for a `RunConfig` (its strategy, num_cpu_devices, tpu, zone,
    project and ps_partition: the config's `run` section).

    Returns:
      (strategy, DeviceInfo)

    Raises:
      TPUUnavailableError: `tpu` asked for but unreachable (never a hang).
      ConfigError: a strategy that cannot be built here, naming `run.strategy`.
    """
    key = (run.strategy, run.num_cpu_devices, run.tpu, run.zone, run.project, run.ps_partition)
    # Mirrored input iterators are freed when a job's Estimator goes: without this they can
    # block the process for up to a minute each (see the function's docstring).
    workarounds.fast_multi_device_iterator_teardown()
    if key not in _STRATEGIES:
        _STRATEGIES[key] = _build_strategy(run)
    return _STRATEGIES[key]


def _build_strategy(run: RunConfig):
    import tensorflow as tf

    kind = run.strategy
    if run.num_cpu_devices:
        split_cpu(int(run.num_cpu_devices))
    if kind == "auto":
        if run.tpu or os.environ.get("TPU_NAME"):
            kind = "tpu"
        elif _in_worker_cluster():  # TF_CONFIG alone switches the same job to synchronous multi-worker
            kind = "multi_worker"
        elif tf.config.list_physical_devices("GPU"):
            kind = "gpu"
        elif (run.num_cpu_devices or 1) > 1:
            kind = "mirrored"
        else:
            kind = "cpu"
    if kind == "tpu":
        return _tpu_strategy(run)
    if kind == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            raise ConfigError("run.strategy", "multi_worker",
                              "a TF_CONFIG environment variable describing the cluster (see docs/scaling-out.md, 'What runs where')")
        task = tf_config_task() or {}
        if task.get("type") in ("ps", "evaluator"):  # they never join the workers' all-reduce
            raise ConfigError("TF_CONFIG", json.dumps(task),
                              "a chief or worker task for run.strategy: multi_worker (ps tasks serve "
                              "run.strategy: parameter_server; an evaluator task evaluates the chief's checkpoints)")
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        return strategy, describe_strategy("multi_worker", strategy)
    if kind == "parameter_server":
        return _parameter_server_strategy(run)
    if kind == "gpu":
        gpus = tf.config.list_logical_devices("GPU")
        if not gpus:
            raise ConfigError("run.strategy", "gpu", "'auto' or 'cpu' on a machine without a GPU (none was found)")
        if len(gpus) == 1:
            strategy = tf.distribute.OneDeviceStrategy(gpus[0].name)
        else:
            strategy = tf.distribute.MirroredStrategy([d.name for d in gpus])
        return strategy, describe_strategy("gpu", strategy, kind="gpu")
    if kind == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
        strategy = tf.distribute.MirroredStrategy(devices)
        return strategy, describe_strategy("mirrored", strategy, kind="gpu" if gpus else "cpu")
    # cpu: one replica even when the CPU is split (use `mirrored` for one per logical device)
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    return strategy, describe_strategy("cpu", strategy, kind="cpu")


def _in_worker_cluster() -> bool:
    """TF_CONFIG makes this process a chief/worker of a cluster of several workers and no ps."""
    parsed = read_tf_config() or {}
    role = task_role()
    return role.task_type in ("chief", "worker") and role.num_workers > 1 and not (parsed.get("cluster") or {}).get("ps")


def describe_strategy(name: str, strategy, kind: str | None = None, topology: str | None = None) -> DeviceInfo:
    devices = tuple(getattr(strategy.extended, "worker_devices", ()) or ())
    if kind is None:
        kind = "gpu" if any("GPU" in d.upper() for d in devices) else "cpu"
    return DeviceInfo(strategy_name=name, kind=kind, num_replicas=int(strategy.num_replicas_in_sync),
                      devices=devices, topology=topology)




def _parameter_server_strategy(run: RunConfig):
    """ParameterServerStrategy for the coordinator (the `chief` task of TF_CONFIG); the `ps`
    and `worker` tasks only run a `tf.distribute.Server` (`cluster.tasks.serve`)."""
    import tensorflow as tf

    cluster, task = cluster_spec(), tf_config_task() or {}
    if not cluster.get("ps") or not cluster.get("worker") or task.get("type") != "chief":
        raise ConfigError("run.strategy", "parameter_server",
                          "a TF_CONFIG environment variable naming `chief`, `worker` and `ps` tasks, with this "
                          f"process as the chief (TF_CONFIG task: {task or 'none'}; cluster: {sorted(cluster)}); "
                          "`tpuestimator cluster --workers N --ps M CONFIG` starts such a cluster locally")
    partition = run.ps_partition  # a `config_views.PsPartition`
    partitioner = None
    if partition:
        partitioner = partitioning.PsPartitioner(min_shard_bytes=int(partition.min_shard_bytes or 256 << 10),
                                                 max_shards=int(partition.max_shards or len(cluster["ps"])))
    strategy = tf.distribute.experimental.ParameterServerStrategy(training_cluster_resolver(),
                                                                  variable_partitioner=partitioner)
    if partitioner is not None:
        partitioning.register(strategy, partitioner)
    workers = tuple(f"/job:worker/replica:0/task:{i}" for i in range(len(cluster["worker"])))
    return strategy, DeviceInfo(strategy_name="parameter_server", kind="cpu" if not tf.config.list_physical_devices("GPU")
                                else "gpu", num_replicas=int(strategy.num_replicas_in_sync), devices=workers)




def is_parameter_server(strategy) -> bool:
    """True for a ParameterServerStrategy (its training is scheduled by a ClusterCoordinator)."""
    import tensorflow as tf

    return isinstance(strategy, tf.distribute.experimental.ParameterServerStrategy)


def input_on_host(strategy) -> bool:
    """True when the strategy is one replica on the host CPU (input needs no distributing),
    and for evaluation and prediction under parameter servers, which run on the coordinator."""
    import tensorflow as tf

    if is_parameter_server(strategy):
        return True
    if not isinstance(strategy, tf.distribute.OneDeviceStrategy):
        return False
    devices = tuple(getattr(strategy.extended, "worker_devices", ()) or ())
    return len(devices) == 1 and tf.DeviceSpec.from_string(devices[0]).device_type == "CPU"


def _tpu_strategy(run: RunConfig):
    import tensorflow as tf

    tpu = run.tpu or os.environ.get("TPU_NAME")
    where = f"run.tpu={tpu!r} (zone={run.zone!r}, project={run.project!r})"
    fix = ("On a Cloud TPU VM install the `tpu` extra (tensorflow-tpu + libtpu) and use run.tpu: local; "
           "elsewhere give the TPU's name with run.zone and run.project, or its grpc://host:port address; "
           "or set run.strategy: auto to train on CPU/GPU. `tpuestimator check CONFIG` rehearses TPU "
           "compatibility on a CPU.")
    # Each probe below answers quickly: TPU initialisation against an unreachable address can
    # otherwise block for many minutes, and users must get an error, not a hang.
    if tpu == "local":
        if not tf.config.list_physical_devices("TPU"):
            raise TPUUnavailableError(f"No TPU is reachable for {where}: this machine has no local TPU devices "
                                      f"(TensorFlow lists none). {fix}")
    elif str(tpu).startswith("grpc://"):
        _probe_tcp(str(tpu)[len("grpc://"):], where, fix)

    def connect():
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
            tpu=None if tpu == "local" else tpu, zone=run.zone, project=run.project)
        tf.config.experimental_connect_to_cluster(resolver)
        return resolver, tf.tpu.experimental.initialize_tpu_system(resolver)

    try:
        resolver, topology = _with_timeout(connect, float(os.environ.get("TPUESTIMATOR_TPU_TIMEOUT", "120")))
    except TimeoutError:
        raise TPUUnavailableError(f"No TPU answered within the time limit for {where}. {fix}") from None
    except Exception as exc:  # TF raises many types here (ValueError, OpError, HttpError, ...)
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise TPUUnavailableError(f"No TPU is reachable for {where}: {type(exc).__name__}: {first}. {fix}") from None
    strategy = tf.distribute.TPUStrategy(resolver)
    topo = "x".join(str(d) for d in getattr(topology, "mesh_shape", ())) or None
    return strategy, describe_strategy("tpu", strategy, kind="tpu", topology=topo)


def _probe_tcp(address: str, where: str, fix: str) -> None:
    import socket

    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            return
    except (OSError, ValueError) as exc:
        raise TPUUnavailableError(f"No TPU is reachable for {where}: cannot connect to {address} ({exc}). {fix}") from None


def _with_timeout(fn, seconds: float):
    import threading

    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="tpu-connect", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise TimeoutError
    if "error" in box:
        raise box["error"]
    return box["value"]




def sync_workers(strategy) -> None:
    """Waits until every worker of a multi-worker strategy gets here (one tiny all-reduce).

    At the end of a job: worker 0 hosts TensorFlow's coordination service, and when it exits
    while another worker is still exporting, that worker's heartbeat fails with an alarming
    "Failed to send RPC to coordination service" (or worse, mid-save). After this barrier
    the workers only print and exit.
    """
    import tensorflow as tf

    @tf.function  # eager collective calls warn of their overhead
    def barrier():
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(1.0)), axis=None)

    barrier()
