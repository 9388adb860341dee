"""What `tpuestimator train` does in a task of a TF_CONFIG cluster (`task_duty`), and the
ps/worker tasks' server loop under parameter servers (`serve`): TensorFlow's own
`tf.distribute.Server`, run until the chief has finished.
"""
from __future__ import annotations

import logging
import socket
import time

from tpuestimator.core.cluster_task import cluster_spec, tf_config_task, training_cluster_resolver

logger = logging.getLogger(__name__)


def task_duty(strategy: str, environ=None) -> str:
    """What `tpuestimator train` does in this process: 'train', 'server' (a ps or worker task
    of parameter_server) or 'evaluator', from TF_CONFIG's task and the config's `run.strategy`."""
    kind = (tf_config_task(environ) or {}).get("type")
    if kind == "evaluator":
        return "evaluator"
    if strategy == "parameter_server" and kind in ("ps", "worker"):
        return "server"
    return "train"


def _reachable(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return True
    except OSError:
        return False


def serve(*, poll_seconds: float = 1.0, gone_after: int = 3, wait_for_chief_s: float | None = None) -> dict:
    """Runs this ps/worker task's `tf.distribute.Server` until the chief has finished.

    The chief (the coordinator) holds a server at its TF_CONFIG address while it trains; this
    task polls that address and returns once it was reachable and then stayed unreachable
    for `gone_after` polls (the chief ended, or its process was stopped). A chief that never
    appears is waited for `wait_for_chief_s` seconds (None: for ever, as in a Kubernetes pod).

    Returns:
      {"task": "ps:0", "chief": address}.
    """
    import tensorflow as tf

    task = tf_config_task() or {}
    cluster = cluster_spec()
    resolver = training_cluster_resolver()
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=task["type"], task_index=int(task.get("index", 0)),
                                  protocol=resolver.rpc_layer, start=True)
    chief = (cluster.get("chief") or [None])[0]
    name = f"{task['type']}:{task.get('index', 0)}"
    logger.info("%s serving at %s for the chief at %s", name, server.target, chief)
    seen, missed, started = False, 0, time.monotonic()
    while chief:
        if _reachable(chief):
            seen, missed = True, 0
        elif seen:
            missed += 1
            if missed >= gone_after:
                break
        elif wait_for_chief_s is not None and time.monotonic() - started > wait_for_chief_s:
            logger.warning("%s: the chief at %s never appeared within %.0f s", name, chief, wait_for_chief_s)
            break
        time.sleep(poll_seconds)
    logger.info("%s: the chief has finished; stopping", name)
    return {"task": name, "chief": chief}
