"""Multi-worker training from TF_CONFIG on real local clusters (processes on 127.0.0.1):
MultiWorkerMirroredStrategy, its input sharding, exact split evaluation, chief-only writes,
whole-cluster restarts; `tpuestimator cluster` and its Kubernetes manifest."""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import yaml

from helpers import without_sklearn
from tpuestimator.cluster.layout import ClusterShape, cluster_layout, tf_configs
from tpuestimator.cluster.local_cluster import run_local_cluster
from tpuestimator.core.cluster_task import read_tf_config, task_role
from tpuestimator.errors import ConfigError

pytestmark = pytest.mark.real_process  # TPUESTIMATOR_STRESS=N repeats these (conftest.py)

PARITY_EVAL_EXAMPLES = 24  # tests/fixtures/parity manifest: eval count (not a multiple of the batch, 16)
# Final eval loss of 2 workers against 1 process with the same global batch, data order and
# seed: the same examples make each global batch (see `_same_batches`), so only the order of
# float additions differs (measured difference: below 1e-6).
LOSS_TOLERANCE = 1e-4


def _same_batches() -> list[str]:
    """`data.shuffle_buffer=1`: each batch is permuted only within itself, so with the one train
    file sharded by record (worker w reads records w, w+2, ...), the 2 workers' per-replica
    batches of 8 together hold exactly the records of the 1-process global batch of 16."""
    return ["--set", "data.shuffle_buffer=1"]


def _env(tmp_path) -> dict:
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(os.path.dirname(__file__), "..", "..", "python") + os.pathsep + env.get(
        "PYTHONPATH", "")
    env.update(TF_CPP_MIN_LOG_LEVEL="2", TMPDIR=str(scratch))  # the workers' scratch folders land here
    return without_sklearn(env)  # as on the core install: each task starts 2 CPU s sooner


# ---------------------------------------------------------------------------------- roles, shapes

@pytest.mark.quick("cluster")
def test_task_roles_from_tf_config():
    cluster = {"worker": ["a:1", "b:2"]}
    role = task_role({"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}})})
    assert role.is_chief and role.num_workers == 2 and role.name == "worker 0"
    role = task_role({"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 1}})})
    assert not role.is_chief
    with_chief = {"chief": ["c:0"], **cluster, "ps": ["p:3"]}
    role = task_role({"TF_CONFIG": json.dumps({"cluster": with_chief, "task": {"type": "worker", "index": 0}})})
    assert not role.is_chief and role.num_workers == 3
    assert task_role({"TF_CONFIG": json.dumps({"cluster": with_chief, "task": {"type": "chief"}})}).is_chief
    local = task_role({})
    assert local.is_chief and not local.in_cluster
    for bad in ("{not json", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 2}}),
                json.dumps({"cluster": cluster, "task": {"type": "boss", "index": 0}})):
        with pytest.raises(ConfigError, match="TF_CONFIG"):
            read_tf_config({"TF_CONFIG": bad})


def test_cluster_shapes_give_each_task_its_tf_config():
    shape = ClusterShape(workers=2, ps=1, evaluator=True)
    assert shape.tasks() == [("chief", 0), ("worker", 0), ("worker", 1), ("ps", 0), ("evaluator", 0)]
    cluster = cluster_layout(shape, lambda kind, i: f"{kind}{i}:1")
    assert cluster == {"chief": ["chief0:1"], "worker": ["worker0:1", "worker1:1"], "ps": ["ps0:1"]}
    configs = tf_configs(shape, cluster)
    assert [c["task"] for _, _, c in configs] == [{"type": k, "index": i} for k, i in shape.tasks()]
    assert all(c["cluster"] == cluster for _, _, c in configs)
    for bad in (dict(workers=0), dict(workers=2, ps=-1), dict(workers=True)):
        with pytest.raises(ConfigError):
            ClusterShape(**bad)
    with pytest.raises(ConfigError, match="parameter_server"):
        ClusterShape(workers=2, ps=1).check_strategy("multi_worker")
    with pytest.raises(ConfigError, match="multi_worker"):
        ClusterShape(workers=2).check_strategy("mirrored")
    ClusterShape(workers=2).check_strategy("auto")  # TF_CONFIG turns auto into multi_worker


def test_cluster_refuses_a_config_without_a_cluster_strategy_before_starting(fixtures_dir, tmp_path):
    started = []
    with pytest.raises(ConfigError, match="run.strategy"):
        run_local_cluster(str(fixtures_dir / "parity" / "parity.yaml"), workers=2, train_args=["--set=run.strategy=cpu"],
                          on_start=lambda cluster, attempt: started.append(cluster))
    with pytest.raises(ConfigError, match="--restarts"):
        run_local_cluster(str(fixtures_dir / "parity" / "parity.yaml"), workers=2, restarts=-1,
                          train_args=["--set", "run.strategy=multi_worker"])
    assert started == []


def test_kubernetes_manifest_parses_and_gives_each_pod_its_tf_config(fixtures_dir, capsys):
    from tpuestimator.cli import main

    config = str(fixtures_dir / "parity" / "parity.yaml")
    assert main(["cluster", "--workers", "3", "--evaluator", "--print-k8s", "--image", "me/tpuestimator:1", config,
                 "--set", "run.strategy=multi_worker", "--model-dir", "gs://bucket/parity"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    kinds = [d["kind"] for d in docs]
    assert kinds == ["ConfigMap", "Service", "Job", "Job", "Job", "Job"]
    config_map, service, jobs = docs[0], docs[1], docs[2:]
    assert yaml.safe_load(config_map["data"]["parity.yaml"])["name"] == "parity"
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["ports"][0]["port"] == 2222
    pods = {}
    for job in jobs:
        pod = job["spec"]["template"]["spec"]
        assert pod["subdomain"] == service["metadata"]["name"] == "parity"
        assert job["spec"]["template"]["metadata"]["labels"].items() >= service["spec"]["selector"].items()
        container = pod["containers"][0]
        assert container["image"] == "me/tpuestimator:1"
        assert container["command"] == ["tpuestimator", "train", "/etc/tpuestimator/parity.yaml", "--set",
                                        "run.strategy=multi_worker", "--model-dir", "gs://bucket/parity"]
        env = {e["name"]: e["value"] for e in container["env"]}
        pods[pod["hostname"]] = json.loads(env["TF_CONFIG"])
    assert set(pods) == {"parity-worker-0", "parity-worker-1", "parity-worker-2", "parity-evaluator-0"}
    workers = [f"parity-worker-{i}.parity:2222" for i in range(3)]
    for host, tf_config in pods.items():
        kind, index = host.split("-")[1:]
        assert tf_config == {"cluster": {"worker": workers}, "task": {"type": kind, "index": int(index)}}
        if kind == "worker":  # each worker's own address is its pod's DNS name in the service
            assert tf_config["cluster"]["worker"][int(index)] == f"{host}.parity:2222"


def test_kubernetes_manifest_for_parameter_servers_names_a_chief():
    from tpuestimator.cluster.kubernetes import manifest_objects

    objects = manifest_objects(ClusterShape(workers=2, ps=2), name="Big Job", config_text="name: x\n",
                               image="img")
    jobs = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Job"}
    assert set(jobs) == {"big-job-chief-0", "big-job-worker-0", "big-job-worker-1", "big-job-ps-0", "big-job-ps-1"}
    env = jobs["big-job-ps-1"]["spec"]["template"]["spec"]["containers"][0]["env"]
    tf_config = json.loads(env[0]["value"])
    assert tf_config["task"] == {"type": "ps", "index": 1}
    assert tf_config["cluster"]["chief"] == ["big-job-chief-0.big-job:2222"]


# ---------------------------------------------------------------------------------- input

def test_record_sharding_with_fewer_files_than_workers_splits_every_record_once(fixtures_dir):
    """One file of 12 records (less than one read chunk) for 2 input pipelines: each pipeline
    reads a disjoint half (sharding whole chunks left the second pipeline with nothing)."""
    import tensorflow as tf

    from tpuestimator.data.pipeline import build_dataset
    from tpuestimator.data.spec import resolve_section

    section = resolve_section({"format": "mnist", "train": str(fixtures_dir / "mnist_good.tfrecord"),
                               "eval": str(fixtures_dir / "mnist_good.tfrecord"), "image": {"height": 8, "width": 8}})
    seen = []
    for worker in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=worker, num_replicas_in_sync=2)
        ds = build_dataset(section, "eval", section.eval, batch_size=4, input_context=ctx)
        images = np.concatenate([f["image"].numpy().reshape(len(y), -1) for f, y in ds])
        assert len(images) == 6
        seen.append(images)
    everything = np.concatenate([f["image"].numpy().reshape(len(y), -1)
                                 for f, y in build_dataset(section, "eval", section.eval, batch_size=4)])
    both = np.concatenate(seen)
    assert sorted(map(bytes, both)) == sorted(map(bytes, everything))


def test_worker_share_partitions_each_padded_global_batch():
    """Every worker reads the same padded global batches and keeps its slice: the same number
    of steps on every worker, each real example exactly once across them."""
    import tensorflow as tf

    from tpuestimator.core.batching import MASK_KEY, pad_and_mask, worker_share

    x = np.arange(21, dtype="float32")
    ds = tf.data.Dataset.from_tensor_slices(({"x": x}, x.astype("int32"))).batch(4)  # per-replica batches of 4
    steps, real = [], []
    for worker in range(2):  # 2 workers x 2 replicas each = 4 replicas, global batch 16
        share = worker_share(pad_and_mask(ds, per_replica=4, replicas=4, steps=None), worker=worker, workers=2,
                             per_replica=4)
        batches = list(share)
        steps.append(len(batches))
        for features, _labels in batches:
            assert features["x"].shape == (4,)
            real.extend(features["x"].numpy()[features[MASK_KEY].numpy() > 0].tolist())
    assert steps[0] == steps[1] == 4  # 2 global batches, 2 local replicas each
    assert sorted(real) == x.tolist()


# ---------------------------------------------------------------------------------- real clusters

def _scratch_left(tmp_path) -> list[str]:
    """The workers' scratch folders left in the cluster's TMPDIR (TensorFlow's own autograph
    files may stay there too)."""
    return [name for name in os.listdir(tmp_path / "tmp") if name.startswith("tpuestimator-")]


def _lines_of(lines: list, name: str) -> list[str]:
    return [line for task, line in lines if task == name]


@pytest.mark.slow
def test_two_workers_train_in_step_write_once_and_match_one_process(fixtures_dir, tmp_path, forked_python, caplog,
                                                                   capsys):
    """Also a side-car evaluator (`--evaluator`) beside the multi-worker cluster: it evaluates the
    chief's checkpoint into the chief's run record.

    And the race of issue 19: worker 1 removed "a killed run's leftovers" from the shared model
    dir, among them the chief's config.yaml temp file in the middle of its atomic write, and the
    chief died renaming it. Here each task's `tpuestimator train` is held_config_write.py, whose
    chief holds that write open until worker 1's job has started; only the chief (the model
    dir's owner) clears leftovers. (A cluster of its own for this cost two TensorFlow starts.)"""
    from tpuestimator.cluster.local_cluster import LocalCluster
    from tpuestimator.jobs.job import run_job
    from tpuestimator.runs import ls_runs

    config = str(fixtures_dir / "parity" / "parity.yaml")
    model_dir, runs_dir = tmp_path / "model", tmp_path / "runs"
    model_dir.mkdir()
    (model_dir / ".ckpt-9.k2j4x9ab.tmp").write_text("left by a killed run")  # still cleared, by the chief
    env = _env(tmp_path)
    env["PYTHONPATH"] = os.path.dirname(__file__) + os.pathsep + env["PYTHONPATH"]
    # each task a real process on its own, started by the product's LocalCluster (its own session,
    # signals, exit code); forked_python: without its TensorFlow import (~6 CPU s a task; conftest.py)
    command = [forked_python, os.path.join(os.path.dirname(__file__), "held_config_write.py"), "train", config,
               "--set", "run.strategy=multi_worker", *_same_batches(), "--set", "export.enabled=true",
               "--model-dir", str(model_dir), "--runs-dir", str(runs_dir)]
    lines: list = []
    cluster = LocalCluster(ClusterShape(workers=2, evaluator=True), command, env=env,
                           on_line=lambda task, line: lines.append((task.name, line))).start()
    try:
        result = cluster.wait()
    finally:
        cluster.stop()
    assert result.returncode == 0, (result.failed_task, result.last_lines, lines[-40:])
    # the chief alone removed the leftover, and its held config.yaml write completed
    removed = [(name, line) for name, line in lines if "left by a run that was killed" in line]
    assert [name for name, _ in removed] == ["worker 0"], removed
    assert yaml.safe_load((model_dir / "config.yaml").read_text())["train"]["max_steps"] == 40
    # both workers finish at the same global step, and evaluate each example exactly once
    for name in ("worker 0", "worker 1"):
        own = _lines_of(lines, name)
        assert "trained to global step 40" in own, own[-20:]
        evals = [line for line in own if line.startswith("eval  |")]
        assert evals and all(f"num_examples: {PARITY_EVAL_EXAMPLES}" in line for line in evals), evals
    # checkpoints, the export and the run record written once, by the chief; no worker
    # scratch left anywhere
    assert sorted(os.listdir(model_dir)) == ["checkpoint", "ckpt-40.data-00000-of-00001", "ckpt-40.index",
                                             "config.yaml", "eval_sidecar", "export", "last_evaluation.json"]
    assert os.listdir(model_dir / "export" / "final") == ["40"]
    # synchronous replicas: the optimizer counted each global step once (no lost or double step)
    import tensorflow as tf

    optimizer_steps = tf.train.load_variable(str(model_dir / "ckpt-40"), "optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE")
    assert optimizer_steps == 40
    assert len(ls_runs(str(runs_dir))) == 1
    assert _scratch_left(tmp_path) == []
    summary = result.chief_summary()
    assert summary["global_step"] == 40 and summary["metrics"]["num_examples"] == PARITY_EVAL_EXAMPLES
    with open(os.path.join(summary["run_dir"], "tfruns.d", "evaluation.json")) as f:
        cluster_loss = json.load(f)["loss"]
    # the side-car evaluator (same --model-dir / --runs-dir) wrote its evaluation of the chief's
    # checkpoint into the chief's run record: the same loss, every eval example once
    from tpuestimator.runs import run_info

    (sidecar,) = run_info(summary["run_dir"])["sidecar_evaluations"]
    assert sidecar["step"] == 40 and sidecar["num_examples"] == PARITY_EVAL_EXAMPLES
    assert abs(sidecar["loss"] - cluster_loss) < LOSS_TOLERANCE
    assert "side-car evaluator: evaluated the checkpoints of steps 40" in _lines_of(lines, "evaluator 0")
    # one process, same global batch (16), same data order and seed
    single = run_job(config, overrides=["data.shuffle_buffer=1", "run.strategy=cpu"], model_dir=str(tmp_path / "one"),
                     record=False, export=False)
    assert single.global_step == 40 and single.metrics["num_examples"] == PARITY_EVAL_EXAMPLES
    assert abs(cluster_loss - single.metrics["loss"]) < LOSS_TOLERANCE, (cluster_loss, single.metrics["loss"])
    # follow-up jobs on the cluster's model dir run on this one machine (no TF_CONFIG here):
    # the recorded run.strategy=multi_worker falls back to the local strategy (issue 19.2)
    from tpuestimator.cli import main

    assert "TF_CONFIG" not in os.environ
    with caplog.at_level(logging.INFO, logger="tpuestimator"):
        assert main(["evaluate", str(model_dir)]) == 0
        assert main(["export", str(model_dir), "--out", str(tmp_path / "manual")]) == 0
    assert "num_examples" in capsys.readouterr().out
    assert os.listdir(tmp_path / "manual") == ["40"]
    fallbacks = [r.getMessage() for r in caplog.records if "without TF_CONFIG" in r.getMessage()]
    assert len(fallbacks) == 2 and "run.strategy=multi_worker" in fallbacks[0], fallbacks


@pytest.mark.slow
def test_a_killed_worker_restarts_the_cluster_from_the_last_checkpoint(fixtures_dir, tmp_path, forked_python,
                                                                      monkeypatch):
    """Worker 1 is SIGKILLed right after the chief's first checkpoint; with one restart the
    whole cluster starts again, every worker restores the chief's checkpoint and training
    completes. The config keeps `run.strategy: auto`: TF_CONFIG alone makes it multi-worker.
    100 steps: worker 1 dies at the first checkpoint (20) with most of the training ahead (the
    two workers step together, so worker 0 waits for it), as with the 300 steps this took before."""
    config = str(fixtures_dir / "parity" / "parity.yaml")
    max_steps = 100
    model_dir = tmp_path / "model"
    clusters, lines, killed = [], [], []

    def on_line(task, line):
        lines.append((len(clusters) - 1, task.name, line))
        if not killed and task.name == "worker 0" and line.startswith("saved checkpoint"):
            victim = next(t for t in clusters[0].tasks if t.name == "worker 1")
            victim.process.send_signal(signal.SIGKILL)
            killed.append(line)

    # The tasks are the product's `[sys.executable, "-m", "tpuestimator", "train", ...]`: this
    # process's `python` is forked_python while the cluster runs, as if the test had run
    # `tpuestimator cluster` with it (each task a real process, SIGKILLed and restarted, without
    # its TensorFlow import: ~6 CPU s a task; conftest.py). The product's command is unchanged.
    with monkeypatch.context() as patched:
        patched.setattr(sys, "executable", forked_python)
        result = run_local_cluster(
            config, workers=2, restarts=1, env=_env(tmp_path), on_line=on_line,
            on_start=lambda cluster, attempt: clusters.append(cluster),
            train_args=["--set", f"train.max_steps={max_steps}",
                        "--set", "train.save_checkpoints_steps=20", "--model-dir", str(model_dir),
                        "--runs-dir", str(tmp_path / "runs")])
    assert result.returncode == 0 and result.restarts == 1, [x for x in lines if x[0] == len(clusters) - 1][-30:]
    assert killed and len(clusters) == 2
    first_ckpt = int(killed[0].rsplit("-", 1)[1])
    assert 0 < first_ckpt < max_steps
    assert clusters[0].tasks[1].process.returncode == -signal.SIGKILL
    second = [(name, line) for attempt, name, line in lines if attempt == 1]
    for name in ("worker 0", "worker 1"):
        restored = [line for n, line in second if n == name and line.startswith("restored ")]
        assert restored and int(restored[0].rsplit(" ", 1)[1]) >= first_ckpt, restored
        assert f"trained to global step {max_steps}" in [line for n, line in second if n == name]
    assert f"ckpt-{max_steps}.index" in os.listdir(model_dir)
    from tpuestimator.runs import run_info

    final_run = result.chief_summary()["run_dir"]
    properties = run_info(final_run)["properties"]
    assert properties["strategy"] == "multi_worker" and int(properties["num_replicas"]) == 2
    # one completed run; the killed attempt's record is closed as restarted, naming why and
    # the run that continued it (issue 19.7)
    from tpuestimator.runs import ls_runs

    runs = {r["run_dir"]: r for r in ls_runs(str(tmp_path / "runs"))}
    assert len(runs) == 2 and runs[final_run]["status"] == "completed"
    (killed_run,) = set(runs) - {final_run}
    assert runs[killed_run]["status"] == "restarted", runs[killed_run]
    reason = run_info(killed_run)["properties"]["restarted"]
    assert "worker 1" in reason and os.path.basename(final_run) in reason, reason
    assert int(properties["resumed_from_step"]) >= first_ckpt
    assert not [f for f in os.listdir(model_dir) if f.startswith(".")]
    assert _scratch_left(tmp_path) == []  # the killed worker's scratch cleared by its restart


def test_cluster_command_reports_the_failed_task_and_exits_with_its_code(fixtures_dir, tmp_path, forked_python):
    """Every task fails at once here (a train flag their `tpuestimator train` does not know,
    which the launcher passes on unchecked): the exit code is the task's and the report names
    it with its last log lines. (Stopping the healthy tasks when one dies is shown by the
    killed-worker test above.) forked_python: the command and its tasks (`sys.executable`) are
    real processes without their TensorFlow import (conftest.py)."""
    config = str(fixtures_dir / "parity" / "parity.yaml")
    proc = subprocess.run(
        [forked_python, "-m", "tpuestimator", "cluster", "--workers", "2", config, "--set",
         "run.strategy=multi_worker", "--no-such-train-flag"],
        env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "[worker 0] " in proc.stdout + proc.stderr or "[worker 1] " in proc.stdout + proc.stderr
    assert "failed (exit 2); the cluster was stopped. Its last lines:" in proc.stderr
    assert "unrecognized arguments: --no-such-train-flag" in proc.stderr


def _marked_processes(mark: str) -> list[int]:
    """Pids of live processes whose environment holds TPUESTIMATOR_TEST_MARK=mark."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if f"TPUESTIMATOR_TEST_MARK={mark}".encode() in env and state != "Z":
            pids.append(int(pid))
    return pids


def test_ctrl_c_stops_every_task(fixtures_dir, tmp_path):
    """A fresh `python` (not conftest's forked_python): the tasks are found by their environment
    in /proc, which shows a forked run's server's, not its own."""
    import time
    import uuid

    mark = uuid.uuid4().hex
    env = dict(_env(tmp_path), TPUESTIMATOR_TEST_MARK=mark)
    launcher = subprocess.Popen(
        [sys.executable, "-m", "tpuestimator", "cluster", "--workers", "2", str(fixtures_dir / "parity" / "parity.yaml"),
         "--set", "run.strategy=multi_worker", "--model-dir", str(tmp_path / "m"), "--no-record"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # as from a terminal: pytest started in the background of a script (`cmd &`) has SIGINT
        # ignored, which the launcher would inherit and rightly keep (the stress runs met it)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while len(set(_marked_processes(mark)) - {launcher.pid}) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    tasks = set(_marked_processes(mark)) - {launcher.pid}
    assert len(tasks) == 2
    launcher.send_signal(signal.SIGINT)  # what Ctrl-C sends (the tasks run in their own sessions)
    _, err = launcher.communicate(timeout=60)
    assert launcher.returncode == 130, err[-2000:]
    assert "interrupted" in err
    assert not set(_marked_processes(mark)) & tasks


def test_a_ctrl_c_the_moment_a_task_is_forked_still_stops_it(fixtures_dir, tmp_path, monkeypatch, ctrl_c_raises):
    """The race the test above met once in a whole run (a task outlived the Ctrl-C): SIGINT
    arrives inside `subprocess.Popen` of the second task, after its fork, before Popen returns.
    Raised there, the KeyboardInterrupt lost that task's only handle; now it waits until the
    task is held (system/processes.py `sigint_held`), and every task started is stopped."""
    started: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    class PopenInterruptedAtTheSecond(real_popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self)
            if len(started) == 2:
                signal.raise_signal(signal.SIGINT)  # Python runs its handler at the next bytecode

    monkeypatch.setattr(subprocess, "Popen", PopenInterruptedAtTheSecond)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_local_cluster(str(fixtures_dir / "parity" / "parity.yaml"), workers=2,
                              train_args=["--set", "run.strategy=multi_worker", "--no-record"], env=_env(tmp_path))
        assert len(started) == 2
        assert [p.poll() for p in started] == [-signal.SIGTERM] * 2  # stopped, reaped
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        for process in started:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def test_sigint_held_runs_its_block_then_raises_and_holds_nothing_where_it_cannot(ctrl_c_raises):
    import threading

    from tpuestimator.system.processes import sigint_held

    after: list = []
    with pytest.raises(KeyboardInterrupt):
        with sigint_held():
            signal.raise_signal(signal.SIGINT)
            after.append("the rest of the block ran")
    assert after == ["the rest of the block ran"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    # A thread cannot set signal handlers (ValueError): its block runs with nothing held
    outcome: list = []

    def in_a_thread():
        try:
            with sigint_held():
                outcome.append("ran")
        except BaseException as exc:  # noqa: BLE001 - the test reports whatever it was
            outcome.append(repr(exc))

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    assert outcome == ["ran"]
    # Any handler but Python's default is left alone: ignored (a background job's) stays ignored;
    # another (R's reticulate has one, whose C-level half signal.signal would replace) is kept
    def other_handler(signum, frame):
        outcome.append("other handler")

    try:
        for handler in (signal.SIG_IGN, other_handler):
            signal.signal(signal.SIGINT, handler)
            with sigint_held():
                assert signal.getsignal(signal.SIGINT) is handler
                signal.raise_signal(signal.SIGINT)
                outcome.append("raised")
        assert outcome == ["ran", "raised", "other handler", "raised"]
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as ctrl_c_raises set it
    # A Ctrl-C held while the block fails is raised all the same, the block's error its context
    with pytest.raises(KeyboardInterrupt) as interrupt:
        with sigint_held():
            signal.raise_signal(signal.SIGINT)
            raise OSError("no such program")
    assert isinstance(interrupt.value.__context__, OSError)


# Stand-in tasks for the orchestration alone (no TensorFlow): each reads its TF_CONFIG and
# behaves as the real task of that type would at its end.
_TASK_SCRIPT = """
import json, os, sys, time
task = json.loads(os.environ["TF_CONFIG"])["task"]
print("task", task["type"], task["index"], flush=True)
behaviour = json.loads(sys.argv[1]).get(f"{task['type']} {task['index']}", "serve")
if behaviour == "serve":  # a server: runs until stopped
    time.sleep(600)
time.sleep(0.3)
sys.exit(int(behaviour))
"""


def _stand_in_cluster(shape, behaviours: dict):
    from tpuestimator.cluster.local_cluster import LocalCluster

    lines: list = []
    cluster = LocalCluster(shape, [sys.executable, "-c", _TASK_SCRIPT, json.dumps(behaviours)],
                           on_line=lambda task, line: lines.append((task.name, line))).start()
    return cluster, cluster.wait(poll_s=0.05), lines


def test_a_parameter_server_cluster_ends_with_its_chief_and_stops_the_servers():
    cluster, result, lines = _stand_in_cluster(ClusterShape(workers=2, ps=1), {"chief 0": "0"})
    assert result.returncode == 0 and result.failed_task is None
    assert {name for name, _ in lines} == {"chief 0", "worker 0", "worker 1", "ps 0"}
    assert [t.process.returncode for t in cluster.tasks][0] == 0
    assert all(t.process.returncode == -signal.SIGTERM for t in cluster.tasks[1:])  # the servers were stopped


def test_a_worker_cluster_ends_when_every_worker_is_done_and_a_failure_stops_the_rest():
    cluster, result, _ = _stand_in_cluster(ClusterShape(workers=2, evaluator=True),
                                           {"worker 0": "0", "worker 1": "0", "evaluator 0": "0"})
    assert result.returncode == 0 and all(t.process.returncode == 0 for t in cluster.tasks)
    assert cluster.tasks[2].tf_config["task"] == {"type": "evaluator", "index": 0}
    assert "evaluator" not in cluster.tasks[2].tf_config["cluster"]
    cluster, result, _ = _stand_in_cluster(ClusterShape(workers=3), {"worker 0": "serve", "worker 1": "3",
                                                                    "worker 2": "serve"})
    assert (result.returncode, result.failed_task, result.last_lines) == (3, "worker 1", ("task worker 1",))
    # the other workers wait in a collective for the failed one, where SIGTERM cannot reach them:
    # SIGKILLed at once; an evaluator, which can stop, and every task of a parameter-server
    # cluster get SIGTERM (local_cluster's docstring)
    assert [t.process.returncode for t in cluster.tasks] == [-signal.SIGKILL, 3, -signal.SIGKILL]
    cluster, result, _ = _stand_in_cluster(ClusterShape(workers=2, evaluator=True), {"worker 0": "serve",
                                                                                    "worker 1": "4"})
    assert [t.process.returncode for t in cluster.tasks] == [-signal.SIGKILL, 4, -signal.SIGTERM]
    cluster, result, _ = _stand_in_cluster(ClusterShape(workers=2, ps=1), {"worker 1": "5"})
    assert [t.name for t in cluster.tasks] == ["chief 0", "worker 0", "worker 1", "ps 0"]
    assert [t.process.returncode for t in cluster.tasks] == [-signal.SIGTERM, -signal.SIGTERM, 5, -signal.SIGTERM]
