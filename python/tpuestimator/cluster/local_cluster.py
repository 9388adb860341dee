"""A local cluster: each task a `tpuestimator train` process with its own `TF_CONFIG`.

Process orchestration of TensorFlow's own engine, nothing more: the tasks find each other
through `TF_CONFIG` on free loopback ports and TensorFlow (MultiWorkerMirroredStrategy,
ParameterServerStrategy, the side-car evaluator) does the rest; no RPC of our own.
`tpuestimator cluster` and R's `tpu_train(cluster = ...)` call `run_local_cluster`; the
Kubernetes manifest (`kubernetes.py`) uses the same `cluster_layout` (`layout.py`).

A MultiWorkerMirroredStrategy cluster cannot lose one worker and go on: its collectives
need every worker. So on a task's failure every task is stopped and, with `restarts`, the
whole cluster starts again on fresh ports; the chief's latest checkpoint is where training
resumes (every worker restores it, `checkpointing.restore`). The other workers of such a
cluster are SIGKILLed at once: each waits inside a collective for the dead one, where its
SIGTERM handler cannot run (a killed worker's peer sat out the whole 5-s grace of every
restart); the restart resumes from the latest complete checkpoint (writes are atomic).
Every other stop (the end of a training, Ctrl-C, an evaluator, a parameter-server cluster)
is SIGTERM, then SIGKILL after `STOP_GRACE_S`.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tpuestimator.cluster.layout import ClusterShape, cluster_layout, free_ports, tf_configs
from tpuestimator.errors import ConfigError
from tpuestimator.system.processes import sigint_held

logger = logging.getLogger(__name__)

# Lines of each task's log kept for the failure report and the chief's summary.
LAST_LINES = 40
# Seconds a task gets to stop after SIGTERM before SIGKILL.
STOP_GRACE_S = 5.0


@dataclasses.dataclass
class Task:
    """One running task: its name (`worker 1`), TF_CONFIG, process and last log lines."""

    task_type: str
    index: int
    tf_config: dict
    process: subprocess.Popen
    last_lines: collections.deque = dataclasses.field(default_factory=lambda: collections.deque(maxlen=LAST_LINES))
    reader: threading.Thread | None = None

    @property
    def name(self) -> str:
        return f"{self.task_type} {self.index}"



@dataclasses.dataclass(frozen=True, kw_only=True)
class ClusterResult:
    """How a local cluster ended. `returncode` 0, or the failed task's exit code (128 + the
    signal for a task killed by a signal); `failed_task` and its `last_lines` when one failed;
    `restarts` the whole-cluster restarts used."""

    returncode: int
    failed_task: str | None = None
    last_lines: tuple[str, ...] = ()
    restarts: int = 0
    chief_lines: tuple[str, ...] = ()

    def chief_summary(self) -> dict:
        """What the chief's `tpuestimator train` printed at its end: `global_step`,
        `model_dir`, `export_dir`, `run_dir` and the final evaluation's `metrics`."""
        out: dict = {"metrics": {}}
        in_metrics = False
        for line in self.chief_lines:
            if line.startswith("trained to global step "):
                out["global_step"] = int(line.split()[4])
            elif line == "final evaluation:":
                in_metrics = True
                continue
            for label, key in (("checkpoints:", "model_dir"), ("export:", "export_dir"), ("run record:", "run_dir")):
                if line.startswith(label):
                    out[key] = line[len(label):].strip()
            if in_metrics and line.startswith("  ") and len(line.split()) == 2:
                name, value = line.split()
                try:
                    out["metrics"][name] = float(value) if "." in value or "e" in value else int(value)
                except ValueError:
                    out["metrics"][name] = value
            elif in_metrics:
                in_metrics = False
        return out


class LocalCluster:
    """The processes of one start of a local cluster."""

    def __init__(self, shape: ClusterShape, command: Sequence[str], *, env: dict | None = None,
                 host: str = "127.0.0.1", on_line: Callable[[Task, str], None] | None = None):
        self.shape = shape
        self.command = list(command)
        self.env = dict(os.environ if env is None else env)
        self.host = host
        self.on_line = on_line
        self.tasks: list[Task] = []
        self._lock = threading.Lock()

    def start(self) -> LocalCluster:
        ports = iter(free_ports(len(self.shape.tasks()), self.host))
        cluster = cluster_layout(self.shape, lambda kind, index: f"{self.host}:{next(ports)}")
        for kind, index, tf_config in tf_configs(self.shape, cluster):
            env = dict(self.env, TF_CONFIG=json.dumps(tf_config), PYTHONUNBUFFERED="1")
            # A Ctrl-C waits until the task is in `self.tasks`, where `stop()` reaches it: raised
            # inside Popen, it left the task just forked running with nothing to stop it.
            with sigint_held():
                process = subprocess.Popen(self.command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, text=True, errors="replace", bufsize=1,
                                           start_new_session=True)  # Ctrl-C reaches us once, we stop the tasks
                self.tasks.append(Task(task_type=kind, index=index, tf_config=tf_config, process=process))
            task = self.tasks[-1]
            task.reader = threading.Thread(target=self._read, args=(task,), name=f"log {task.name}", daemon=True)
            task.reader.start()
        return self

    def _read(self, task: Task) -> None:
        for line in task.process.stdout:
            line = line.rstrip("\n")
            with self._lock:
                task.last_lines.append(line)
                if self.on_line is not None:
                    self.on_line(task, line)

    def ends_cluster(self, task: Task) -> bool:
        """The tasks whose end is the cluster's end: the chief (with parameter servers; the ps
        and worker tasks are servers that stop when it has gone) or every worker, and the
        evaluator."""
        return task.task_type in (("chief", "evaluator") if self.shape.ps else ("worker", "evaluator"))

    def wait(self, poll_s: float = 0.2) -> ClusterResult:
        """Waits until the tasks that end the cluster (`ends_cluster`) exit 0, then stops the
        others; or until a task fails (exits non-zero), then stops every other task."""
        while True:
            for task in self.tasks:
                code = task.process.poll()
                if code not in (None, 0):
                    self.stop(kill=self.stuck_after_failure)
                    task.reader.join(timeout=5)
                    return ClusterResult(returncode=code if code > 0 else 128 - code,
                                         failed_task=task.name, last_lines=tuple(task.last_lines))
            if all(t.process.poll() == 0 for t in self.tasks if self.ends_cluster(t)):
                self.stop()
                for task in self.tasks:
                    task.reader.join(timeout=5)
                chief = next(t for t in self.tasks if t.task_type in ("chief", "worker"))
                return ClusterResult(returncode=0, chief_lines=tuple(chief.last_lines))
            time.sleep(poll_s)

    def stuck_after_failure(self, task: Task) -> bool:
        """A worker of a cluster without parameter servers: once another task has failed it
        waits in a collective that never completes (module docstring)."""
        return not self.shape.ps and task.task_type == "worker"

    def stop(self, kill: Callable[[Task], bool] = lambda task: False) -> None:
        """SIGTERM to every task still running (SIGKILL at once to those `kill` picks), SIGKILL
        to those still there after a grace."""
        running = [t for t in self.tasks if t.process.poll() is None]
        for task in running:
            _signal(task.process, signal.SIGKILL if kill(task) else signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for task in running:
            try:
                task.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal(task.process, signal.SIGKILL)
                task.process.wait()


def _signal(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)  # the task's own process group (start_new_session): only its processes
    except ProcessLookupError:
        pass


def train_command(config: str, train_args: Sequence[str] = ()) -> list[str]:
    """The command every task runs: the normal `tpuestimator train`, from this Python."""
    return [sys.executable, "-m", "tpuestimator", "train", str(config), *train_args]


def task_config(config: str, train_args: Sequence[str] = ()):
    """The `JobConfig` every task will load: CONFIG with the train flags' `--set` overrides
    (a bad config or override is a ConfigError here, before any process starts)."""
    from tpuestimator.config import load_config

    args = [str(a) for a in train_args]
    sets = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--set"]
    sets += [a.split("=", 1)[1] for a in args if a.startswith("--set=")]
    return load_config(config, sets)


def run_local_cluster(config: str, *, workers: int, ps: int = 0, evaluator: bool = False,
                      train_args: Sequence[str] = (), restarts: int = 0, env: dict | None = None,
                      host: str = "127.0.0.1", on_line: Callable[[Task, str], None] | None = None,
                      on_start: Callable[[LocalCluster, int], None] | None = None, job=None) -> ClusterResult:
    """Runs `tpuestimator train CONFIG TRAIN_ARGS` as a local cluster until it ends.

    Args:
      config: the config file (its `run.strategy` must suit the shape: `multi_worker` or
        `auto`, or `parameter_server` with `ps`).
      workers, ps, evaluator: the tasks (`ClusterShape`).
      train_args: more `tpuestimator train` arguments (`--set ...`, `--model-dir ...`).
      restarts: how many times the whole cluster starts again after a task fails (training
        resumes from the chief's latest checkpoint).
      on_line: `on_line(task, line)` for each log line of each task (default: logged with a
        `[worker 0]` prefix).
      on_start: `on_start(cluster, attempt)` after each start (attempt 0 is the first).
      job: the `JobConfig` the tasks load, when the caller has it (default `task_config`).

    Returns:
      A `ClusterResult`. Ctrl-C stops every task and re-raises KeyboardInterrupt.
    """
    shape = ClusterShape(workers=workers, ps=ps, evaluator=evaluator)
    if not isinstance(restarts, int) or isinstance(restarts, bool) or restarts < 0:
        raise ConfigError("--restarts", restarts, "a whole number of whole-cluster restarts, 0 or more")
    train_args = [str(a) for a in train_args]
    job = job or task_config(config, train_args)  # a bad config fails before any process starts
    shape.check_strategy(job.run.strategy)
    if on_line is None:
        def on_line(task: Task, line: str) -> None:
            logger.info("[%s] %s", task.name, line)
    command = train_command(config, train_args)
    records = _RestartRecords(job, train_args)
    attempt = 0
    while True:
        cluster = LocalCluster(shape, command, env=env, host=host, on_line=on_line)
        try:
            # Started inside the try: a Ctrl-C while the tasks start (they run in their own
            # sessions, so the terminal's Ctrl-C reaches only us) still stops those started.
            cluster.start()
            if on_start is not None:
                on_start(cluster, attempt)
            result = cluster.wait()
        except BaseException:  # Ctrl-C (or a failing callback): no task outlives us
            cluster.stop()
            raise
        if result.returncode == 0 or attempt >= restarts:
            records.continued_in(result.chief_summary().get("run_dir") if result.returncode == 0 else None)
            return dataclasses.replace(result, restarts=attempt)
        attempt += 1
        logger.warning("%s failed (exit %d); restarting the whole cluster from the latest checkpoint "
                       "(restart %d of %d)", result.failed_task, result.returncode, attempt, restarts)
        records.restarted(f"{result.failed_task} failed (exit {result.returncode}); the whole cluster restarted "
                          f"from the latest checkpoint (restart {attempt} of {restarts})")


class _RestartRecords:
    """The run records of a whole-cluster restart: the chief of each attempt records a run; a
    killed attempt's record is closed as ``restarted`` (its `restarted` property: why, and the
    run that continued the training), so one cluster command leaves one completed run and no
    run that looks unfinished (docs/RUN_FORMAT.md)."""

    def __init__(self, cfg, train_args: Sequence[str]):
        args = list(train_args)

        def flag(name):
            values = [args[i + 1] for i, a in enumerate(args[:-1]) if a == name]
            values += [a.split("=", 1)[1] for a in args if a.startswith(name + "=")]
            return values[-1] if values else None

        self.recorded = "--no-record" not in args
        self.runs_dir = flag("--runs-dir") or cfg.run.runs_dir or "runs"
        self.model_dir = os.path.abspath(flag("--model-dir") or cfg.model_dir)
        self.since = time.time()
        self.closed: dict[str, str] = {}   # run dir -> its `restarted` reason

    def restarted(self, reason: str) -> None:
        """Closes the records the attempt that just failed left unfinished."""
        if not self.recorded:
            return
        from tpuestimator.runs import ls_runs

        for row in ls_runs(self.runs_dir):
            start = row.get("start")
            if row.get("model_dir") == self.model_dir and row.get("status") != "completed" and \
                    row["run_dir"] not in self.closed and isinstance(start, (int, float)) and start >= self.since:
                self.closed[row["run_dir"]] = reason
                self._write(row["run_dir"], reason)
        self.since = time.time()

    def continued_in(self, run_dir: str | None) -> None:
        """Names the run that continued the training in each closed record."""
        if run_dir:
            for closed, reason in self.closed.items():
                self._write(closed, f"{reason}; training continued in run {os.path.basename(run_dir)}")

    @staticmethod
    def _write(run_dir: str, reason: str) -> None:
        from tpuestimator.runs import RunRecorder

        RunRecorder(run_dir, start=0).set_properties(restarted=reason)


def cluster_job(config, *, workers: int, ps: int = 0, evaluator: bool = False, restarts: int = 0,
                overrides: Sequence[str] = (), model_dir: str | None = None, runs_dir: str | None = None,
                record: bool = True, export: bool = True, resume: bool = False,
                on_line: Callable[[Task, str], None] | None = None, flags: Mapping[str, Any] | None = None) -> dict:
    """`run_job`'s arguments, run as a local cluster (R's `tpu_train(cluster = ...)`).

    `config` is a file path or a dict (written to a temporary YAML file the tasks read, its data
    paths resolved first); `flags` are mapped as `load_config(flags=)` maps them. Returns the chief's
    summary in `JobResult`'s fields (`history` empty) plus `restarts`; a failed task raises `ClusterTaskError`.
    """
    import shutil
    import tempfile

    from tpuestimator.config import dump_config, load_config
    from tpuestimator.errors import ClusterTaskError

    job = load_config(config, [str(o) for o in overrides], flags=flags)  # validated once, before any task starts
    temp = None
    if isinstance(config, (str, os.PathLike)):  # the overrides with the flags' (job.overrides)
        path, train_args = str(config), [a for o in job.overrides for a in ("--set", o)]
    else:  # a dict: the tasks read the resolved config from a file
        temp = tempfile.mkdtemp(prefix="tpuestimator-cluster-config-")
        path, train_args = os.path.join(temp, "config.yaml"), []
        dump_config(job, path)
    for flag, value in (("--model-dir", model_dir), ("--runs-dir", runs_dir)):
        if value:
            train_args += [flag, str(value)]
    train_args += [flag for flag, on in (("--no-record", not record), ("--no-export", not export),
                                         ("--resume", resume)) if on]
    try:
        result = run_local_cluster(path, workers=workers, ps=ps, evaluator=evaluator, train_args=train_args,
                                   restarts=restarts, on_line=on_line, job=job)
    finally:
        if temp:
            shutil.rmtree(temp, ignore_errors=True)
    if result.returncode:
        raise ClusterTaskError(result.failed_task, result.returncode, result.last_lines, result.restarts)
    summary = result.chief_summary()
    return {"run_dir": summary.get("run_dir"), "model_dir": summary.get("model_dir"),
            "export_dir": summary.get("export_dir"), "metrics": summary["metrics"], "history": [],
            "global_step": summary.get("global_step"), "config": job.to_dict(),  # a plain dict: R's result
            "restarts": result.restarts}
