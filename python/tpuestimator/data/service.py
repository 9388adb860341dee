"""Disaggregated input on the tf.data service: the training pipeline runs on service workers.

With `data.service: grpc://HOST:PORT` the TRAINING pipeline (`pipeline.build_dataset`:
read, shuffle, decode, augment, batch) is handed to a tf.data service dispatcher
(`tf.data.experimental.service.distribute`), which runs it on its workers; the training
process only receives decoded batches. The split is made at the END of the pipeline, after
decoding, augmentation and batching: JPEG decoding and augmentation are what saturate the
training host's CPUs (benchmarks/input_results.md), so they must run on the workers, and a
batch costs one RPC instead of one per example. Batches are sent in pieces of at most
`WIRE_BYTES` (`wire_batch`) that the trainer joins back (`rebatch`): one 77 MB message per
batch of 128 224x224 float images ran at a fifth of the records/s of 4 MB pieces.
Evaluation and prediction stay local: they must see each example exactly once, which the
service does not promise when a worker fails.

`data.service_sharding` maps to `tf.data.experimental.service.ShardingPolicy`:
`dynamic` (the default: the dispatcher hands out files on demand, each example once per
epoch), `off` (every worker runs the whole pipeline; shuffles are then unseeded so the
workers do not produce the same batches) and the static policies `file`, `data`,
`file_or_data`, `hint` (sharded by worker index: the dispatcher must list its workers).

`LocalService` starts TensorFlow's own `DispatchServer` and `WorkerServer`s in this process
(`tpuestimator data serve`); in production they run as their own processes or pods
(docs/scaling-out.md, "Disaggregated input: the tf.data service").
"""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import socket
import uuid
from typing import Any

from tpuestimator.data.spec import DataSpec
from tpuestimator.errors import ConfigError

log = logging.getLogger(__name__)

SHARDING_POLICIES = ("off", "dynamic", "file", "data", "file_or_data", "hint")
PROTOCOL = "grpc"
# Largest batch (bytes) a worker sends in one message; see `wire_batch`.
WIRE_BYTES = 4 * 1024 * 1024


def split_address(address: str, field: str = "data.service") -> tuple[str, int]:
    """`grpc://HOST:PORT` -> (HOST, PORT); a ConfigError naming `field` otherwise."""
    text = str(address or "")
    scheme, sep, rest = text.partition("://")
    host, _, port = rest.rpartition(":")
    if scheme != PROTOCOL or not sep or not host or "/" in rest or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(field, address, "the tf.data service dispatcher as grpc://HOST:PORT, e.g. grpc://localhost:5050")
    return host, int(port)


def sharding_policy(name: str):
    """The `tf.data.experimental.service.ShardingPolicy` of a `data.service_sharding` value."""
    import tensorflow as tf

    if name not in SHARDING_POLICIES:
        raise ConfigError("data.service_sharding", name, "one of " + ", ".join(SHARDING_POLICIES))
    return getattr(tf.data.experimental.service.ShardingPolicy, name.upper())


def job_name(spec: DataSpec, *, pattern: Any, seed: int, input_context: Any = None) -> str:
    """The service job the training process reads from.

    `data.service_job` when set. Otherwise, with several input pipelines (multi-worker
    training) a name every training process derives alike from the data, seed and start
    step, so they share ONE job (the dispatcher splits its stream between them, no example
    twice); with one input pipeline a fresh name, so two runs on one dispatcher never share.
    """
    if spec.service_job:
        return str(spec.service_job)
    if input_context is not None and input_context.num_input_pipelines > 1:
        digest = hashlib.sha1(repr((pattern, int(seed))).encode()).hexdigest()[:12]
        return f"tpuestimator-train-{digest}"
    return f"tpuestimator-train-{uuid.uuid4().hex[:12]}"


def distribute(dataset, *, address: str, sharding: str, job: str, compression: str = "none"):
    """`dataset` (built on this host, run on the workers: `worker_pipeline`) read back from the
    tf.data service. `compression`: "none" (decoded images hardly compress; compressing cost
    2.5x the records/s on loopback) or "auto" (the service decides: for slow networks)."""
    import tensorflow as tf

    split_address(address)
    if compression not in ("none", "auto"):
        raise ConfigError("data.service_compression", compression, "'none' or 'auto'")
    return worker_pipeline(dataset).apply(tf.data.experimental.service.distribute(
        processing_mode=sharding_policy(sharding), service=address, job_name=job,
        compression=None if compression == "none" else "AUTO"))


def worker_pipeline(dataset):
    """`dataset` as the workers run it: without tf.data's autotuning model.

    A worker stopping (`data serve` on Ctrl-C, a pod ending) destroys its tasks' iterators, and
    in TensorFlow 2.21 such an iterator waits for its autotuning thread to wake by itself, which
    it does once per optimization period (doubling up to 60 s while the task runs): after a
    training had read from it, each worker's stop took 0.4-19 s here, and after a long training
    it can pass `data serve`'s 30 s limit (not measured: the period's cap is 60 s). Without the
    model a worker stopped in 0.01-0.02 s. Its maps' AUTOTUNE parallelism is then TensorFlow's
    default (the worker's cores, at most 16), what a worker that only runs input wants: the
    service's records/s on 2 cores did not drop (benchmarks/service_capacity.py --size 64:
    11,700-12,300 records/s without the model, 10,700-11,650 with it). The same TensorFlow wait
    as `core.workarounds.fast_multi_device_iterator_teardown`; remove when, with this removed,
    `data serve` still stops at once after a training has read from it for a minute."""
    import tensorflow as tf

    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def wire_batch(element_spec, batch_size: int) -> int:
    """The batch size the workers send: `batch_size`, or fewer examples so that one batch stays
    under `WIRE_BYTES` (the trainer joins them back). Large messages are slow: on 224x224 JPEGs
    a 77 MB batch of 128 float32 images came through at an eighth of the local pipeline's
    records/s, batches of 16 at half (benchmarks/service_capacity.py)."""
    per_example = example_bytes(element_spec)
    if per_example is None:
        return batch_size  # variable-size features: sizes unknown, send the batches as they are
    return max(1, min(batch_size, WIRE_BYTES // max(1, per_example)))


def example_bytes(element_spec) -> int | None:
    """Bytes of one example of batches with this element signature (batch first; a string
    counts one byte), or None when a feature's size is not fixed."""
    import math

    import tensorflow as tf

    total = 0
    for spec in tf.nest.flatten(element_spec):
        dims = spec.shape[1:]
        if not dims.is_fully_defined():
            return None
        total += math.prod(dims.as_list()) * max(1, spec.dtype.size)
    return total


def check_port_free(host: str, port: int, what: str) -> None:
    """A ConfigError naming `what` when `port` is already in use on `host`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ConfigError(what, port, f"a free port ({port} on {host}: {exc.strerror}); pick another, "
                                          "or 0 for any free port") from None


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclasses.dataclass
class LocalService:
    """A tf.data service started in this process: a dispatcher (unless it joins one) and
    `workers` worker servers. `address` is what `data.service` takes."""

    address: str
    worker_addresses: list[str]
    dispatcher: Any = None
    workers: list = dataclasses.field(default_factory=list)

    def stop(self) -> None:
        """Stops the workers, then the dispatcher."""
        for worker in self.workers:
            worker.stop()
        if self.dispatcher is not None:
            self.dispatcher.stop()
        self.workers, self.dispatcher = [], None


def start_local_service(*, dispatcher_port: int | None = 5050, workers: int = 2, host: str = "127.0.0.1",
                        advertise: str = "localhost", join: str | None = None,
                        worker_ports: list[int] | None = None) -> LocalService:
    """Starts TensorFlow's `DispatchServer` and `workers` `WorkerServer`s.

    Args:
      dispatcher_port: the dispatcher's port (0: any free port); ignored with `join`.
      workers: worker servers to start (0: a dispatcher alone).
      host: the interface checked for free ports.
      advertise: the host name workers give the dispatcher and readers (a pod's IP on Kubernetes).
      join: `grpc://HOST:PORT` of a dispatcher running elsewhere: start workers only.
      worker_ports: fixed worker ports (default: free ports). The dispatcher lists its workers,
        so the static sharding policies (`file`, `data`, ...) work.

    Raises:
      ConfigError: a port in use, a bad `join` address, a negative worker count.
    """
    import tensorflow as tf

    service = tf.data.experimental.service
    if workers < 0:
        raise ConfigError("--workers", workers, "0 or more worker servers")
    ports = list(worker_ports or [])
    if ports and len(ports) != workers:
        raise ConfigError("--worker-port", ports, f"one port per worker ({workers})")
    for port in ports:
        check_port_free(host, port, "--worker-port")
    ports = ports or [free_port(host) for _ in range(workers)]
    worker_addresses = [f"{advertise}:{port}" for port in ports]
    dispatcher = None
    if join:
        dispatcher_host, dispatcher_port = split_address(join, "--join")
        address = join
    else:
        if dispatcher_port:
            check_port_free(host, dispatcher_port, "--dispatcher")
        else:
            dispatcher_port = free_port(host)
        dispatcher_host = "localhost"
        dispatcher = service.DispatchServer(service.DispatcherConfig(
            port=dispatcher_port, protocol=PROTOCOL, worker_addresses=worker_addresses or None))
        address = f"{PROTOCOL}://{advertise}:{dispatcher_port}"
    started = LocalService(address=address, worker_addresses=worker_addresses, dispatcher=dispatcher)
    try:
        for port, worker_address in zip(ports, worker_addresses):
            started.workers.append(service.WorkerServer(service.WorkerConfig(
                dispatcher_address=f"{dispatcher_host}:{dispatcher_port}", worker_address=worker_address,
                port=port, protocol=PROTOCOL)))
    except Exception:
        started.stop()
        raise
    log.info("tf.data service at %s with %d worker(s): %s", address, workers, ", ".join(worker_addresses))
    return started
