"""This process's task in a `TF_CONFIG` cluster: who it is, what `tpuestimator train` does
there, and where a non-chief task writes.

`TF_CONFIG` (TensorFlow's own cluster description) switches the same command into
distributed mode: `{"cluster": {"chief": [...], "worker": [...], "ps": [...]}, "task":
{"type": "worker", "index": 1}}`. The chief is the `chief` task, or worker 0 when the
cluster has no `chief` (`task_role` -> `TaskRole`).

What `tpuestimator train` does in each task (`tpuestimator.cluster.tasks.task_duty`):
- `chief` (or no TF_CONFIG): trains (`job.run_job`); under `run.strategy: parameter_server`
  it is the coordinator that schedules the workers' steps.
- `ps` and `worker` under `parameter_server`: run a `tf.distribute.Server` and serve until
  the chief has finished (`cluster.tasks.serve`); the chief places variables on the ps tasks and runs
  functions on the workers through it. Under `multi_worker` every worker trains.
- `evaluator`: the side-car evaluation of each new checkpoint (`tpuestimator.cluster.sidecar`).

Only the chief writes what users keep (checkpoints, exports, summaries, the run record);
TensorFlow still needs every worker of a MultiWorkerMirroredStrategy to take part in each
save (the variables' values are read collectively), so the other workers write into a
scratch folder that is removed when the process ends (`scratch_dir`).

No home-made cluster code: the servers are TensorFlow's; this module only reads TF_CONFIG
and decides the role (the core needs it: who saves, where scratch goes).
"""
from __future__ import annotations

import atexit
import dataclasses
import hashlib
import json
import logging
import os
import shutil
import tempfile

from tpuestimator.errors import ConfigError

logger = logging.getLogger(__name__)

# The task types TensorFlow's cluster resolver knows (tf.distribute.cluster_resolver).
TASK_TYPES = ("chief", "worker", "ps", "evaluator")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TaskRole:
    """This process's task. Outside a cluster: `task_type` None, chief, one worker.

    Attributes:
      task_type: `chief`, `worker`, `ps`, `evaluator`, or None without TF_CONFIG.
      index: the task's index within its type.
      is_chief: the task that writes checkpoints, exports, summaries and the run record.
      num_workers: the tasks that train synchronously (`chief` + `worker` tasks).
    """

    task_type: str | None
    index: int
    is_chief: bool
    num_workers: int

    @property
    def in_cluster(self) -> bool:
        return self.task_type is not None

    @property
    def name(self) -> str:
        return f"{self.task_type} {self.index}" if self.in_cluster else "local"


def read_tf_config(environ=None) -> dict | None:
    """The parsed `TF_CONFIG`, or None when it is unset or empty; bad JSON or a task that is
    not in the cluster is a `ConfigError` naming `TF_CONFIG`."""
    raw = (os.environ if environ is None else environ).get("TF_CONFIG")
    if not raw:
        return None
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        raise ConfigError("TF_CONFIG", raw, "valid JSON with `cluster` and `task` keys") from None
    if not isinstance(parsed, dict):
        raise ConfigError("TF_CONFIG", raw, "a JSON object with `cluster` and `task` keys")
    cluster, task = parsed.get("cluster") or {}, parsed.get("task") or {}
    if task:  # a TF_CONFIG without a task (a cluster description only) is TensorFlow's to judge
        kind, index = task.get("type"), task.get("index", 0)
        if kind not in TASK_TYPES:
            raise ConfigError("TF_CONFIG", raw, f"task.type one of {', '.join(TASK_TYPES)}")
        # The evaluator is a side-car: TensorFlow keeps it out of the `cluster` dict.
        if kind != "evaluator" and not (isinstance(index, int) and 0 <= index < len(cluster.get(kind) or ())):
            raise ConfigError("TF_CONFIG", raw, f"task {kind} {index} listed in cluster.{kind}")
    return parsed


def task_role(environ=None) -> TaskRole:
    """This process's `TaskRole` from `TF_CONFIG`."""
    parsed = read_tf_config(environ)
    if not parsed or not parsed.get("task"):
        return TaskRole(task_type=None, index=0, is_chief=True, num_workers=1)
    cluster, task = parsed.get("cluster") or {}, parsed["task"]
    kind, index = task["type"], int(task.get("index", 0))
    has_chief = bool(cluster.get("chief"))
    is_chief = kind == "chief" or (kind == "worker" and index == 0 and not has_chief)
    return TaskRole(task_type=kind, index=index, is_chief=is_chief,
                    num_workers=len(cluster.get("chief") or ()) + len(cluster.get("worker") or ()))


def tf_config_task(environ=None) -> dict | None:
    """The task of TF_CONFIG (`{"type": "worker", "index": 0}`), or None when unset."""
    parsed = read_tf_config(environ)
    return parsed.get("task") if parsed else None


def cluster_spec(environ=None) -> dict:
    """TF_CONFIG's `cluster` ({task type: [host:port, ...]}), or {} when unset."""
    parsed = read_tf_config(environ)
    return dict(parsed.get("cluster") or {}) if parsed else {}


def training_cluster_resolver():
    """TF_CONFIG's cluster without its `evaluator`: the side-car evaluator serves nothing, and a
    coordinator whose cluster lists it waits for it for ever (TF 2.21)."""
    import tensorflow as tf

    task = tf_config_task() or {}
    jobs = {kind: list(addresses) for kind, addresses in cluster_spec().items() if kind != "evaluator"}
    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(jobs), task_type=task.get("type"), task_id=int(task.get("index", 0)), rpc_layer="grpc")


def scratch_dir(role: TaskRole, what: str, key: str) -> str:
    """An empty folder for what a non-chief task must write but nobody keeps (`what`:
    'checkpoints', 'job'), outside the shared model dir. Its name is fixed by `key` (the
    model dir), the task and `what`, so a restarted task first clears what a killed one left;
    it is removed when the process exits (and by `remove_scratch`)."""
    digest = hashlib.sha1(os.path.abspath(key).encode()).hexdigest()[:12]
    path = os.path.join(tempfile.gettempdir(), f"tpuestimator-{digest}-{role.task_type}{role.index}-{what}")
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def remove_scratch(path: str | None) -> None:
    """Removes a `scratch_dir` folder now (a no-op for None or a folder already gone)."""
    if path:
        shutil.rmtree(path, ignore_errors=True)
