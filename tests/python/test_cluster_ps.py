"""Parameter-server training and the side-car evaluator on real local clusters: every task is
a `python -m tpuestimator train` process on 127.0.0.1 with its own TF_CONFIG
(tests/python/cluster_helpers.py), as on separate machines, but on one host."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cluster_helpers import REPO, LocalCluster, cluster_spec
from tpuestimator.errors import ConfigError
from tpuestimator.runs import run_info
from tpuestimator.sidecar import SidecarOptions, run_sidecar_evaluator

PS_FLAGS = ["--set", "run.strategy=parameter_server", "--set", "train.max_steps=60",
            "--set", "train.iterations_per_loop=20", "--set", "run.ps_steps_per_invocation=5",
            "--set", "train.save_checkpoints_steps=20", "--set", "eval.every_n_steps=20"]


def _show_logs(cluster: LocalCluster) -> str:
    return "\n".join(f"===== {name}\n" + "\n".join(cluster.log(name).splitlines()[-25:]) for name in cluster.logs)


@pytest.mark.slow
def test_parameter_servers_train_asynchronously_and_a_sidecar_evaluates_every_checkpoint(tmp_path, fixtures_dir):
    config = str(fixtures_dir / "parity" / "parity.yaml")
    model_dir, runs_dir = tmp_path / "model", tmp_path / "runs"
    args = ["train", config, "--model-dir", str(model_dir), "--runs-dir", str(runs_dir), "--no-export", *PS_FLAGS]
    tasks = [("ps", 0), ("worker", 0), ("worker", 1), ("chief", 0), ("evaluator", 0)]
    cluster = LocalCluster(cluster_spec(workers=2, ps=1, evaluator=True), tasks, args, log_dir=tmp_path / "logs")
    try:
        # every task ends by itself: the chief when training is done, the ps and workers once
        # the chief is gone, the evaluator after the final checkpoint
        codes = cluster.wait_all(timeout=400)
    finally:
        cluster.stop()
    assert codes == {name: 0 for name in codes}, _show_logs(cluster)

    (run_dir,) = [p for p in runs_dir.iterdir() if not p.name.startswith(".")]
    info = run_info(str(run_dir))
    props = info["properties"]
    assert info["status"] == "completed" and props["strategy"] == "parameter_server"
    # The global step counts the steps of both workers: each ran some of the scheduled functions.
    by_worker = dict(item.split(":") for item in props["ps_steps_by_worker"].split(","))
    assert set(by_worker) == {"0", "1"} and all(int(n) > 0 for n in by_worker.values()), by_worker
    assert sum(int(n) for n in by_worker.values()) == props["global_step"] == 60
    # Asynchronous updates still learn: the evaluation loss (on the coordinator) falls.
    metrics = info["metrics"]
    assert metrics["epoch"] == [20, 40, 60]
    assert metrics["val_loss"][-1] < metrics["val_loss"][0] and metrics["loss"][-1] < metrics["loss"][0]
    # Checkpoints were written by the chief alone (no worker scratch folders).
    written = sorted(int(p.name.split("-")[1].split(".")[0]) for p in model_dir.glob("ckpt-*.index"))
    assert written == [20, 40, 60] and not list(model_dir.glob(".worker_*"))
    # The side-car evaluated every checkpoint the chief wrote, into the chief's run record, and
    # its numbers are the coordinator's own evaluations of the same checkpoints.
    sidecar = info["sidecar_evaluations"]
    assert [e["step"] for e in sidecar] == written
    for row, evaluation in zip(range(3), sidecar):
        assert evaluation["loss"] == pytest.approx(metrics["val_loss"][row], rel=1e-4)
        assert evaluation["num_examples"] == 24
    assert "evaluated the checkpoints of steps 20, 40, 60" in cluster.log("evaluator-0")


@pytest.mark.slow
def test_ps_partition_shards_variables_and_a_trainable_embedding_over_two_ps_tasks(tmp_path):
    # servers for 2 ps tasks and a worker in the chief's process (ps_sharding_chief.py): the
    # ps/worker role of `tpuestimator train` is proven above, here only the sharding is
    script = Path(__file__).with_name("ps_sharding_chief.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "python"), str(script.parent)]), TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_CONFIG", None)
    done = subprocess.run([sys.executable, str(script)], env=env, cwd=str(tmp_path), capture_output=True, text=True,
                          timeout=300)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    assert done.returncode == 0 and len(lines) == 1, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(lines[0][len("RESULT "):])
    assert result["strategy"] == "parameter_server"
    assert result["big_type"] == "ShardedVariable" and result["big_shapes"] == [[500, 64], [500, 64]]
    assert [d.split("/device")[0] for d in result["big_devices"]] == ["/job:ps/replica:0/task:0", "/job:ps/replica:0/task:1"]
    assert result["small_type"] != "ShardedVariable"  # under min_shard_bytes: one piece
    # Keras 3 cannot update a sharded weight of an ordinary layer: a clear error before training,
    # naming the field and the layer that shards its table itself.
    assert "run.ps_partition" in result["trainable_sharding"] and "logits/kernel (2 shards)" in result["trainable_sharding"]
    assert "sharded_embedding" in result["trainable_sharding"]
    # The embedding layer's table: 2 row shards of 1000 x 16, one on each ps task, trained (the
    # loss falls from chance to near zero: only the embedding separates odd ids from even ones),
    # checkpointed, with the optimizer's slots beside each shard.
    shards = result["embedding_shards"]
    assert [s[1:] for s in shards] == [[1000, 16], [1000, 16]]
    assert [s[0].split("/device")[0] for s in shards] == ["/job:ps/replica:0/task:0", "/job:ps/replica:0/task:1"]
    assert result["embedding_loss_before"] > 0.6 and result["embedding_loss_after"] < 0.1, result
    assert result["embedding_checkpoint"] == "ckpt-60"
    assert [d.split("/device")[0] for d in result["slot_devices"]] == ["/job:ps/replica:0/task:0",
                                                                       "/job:ps/replica:0/task:1"]


@pytest.mark.slow
def test_sidecar_evaluator_of_a_single_chief_evaluates_every_checkpoint(tmp_path, fixtures_dir):
    from tpuestimator.job import run_job

    config = str(fixtures_dir / "parity" / "parity.yaml")
    runs_dir, model_dir = tmp_path / "runs", tmp_path / "model"
    result = run_job(config, overrides=["train.save_checkpoints_steps=10"], model_dir=str(model_dir),
                     runs_dir=str(runs_dir), export=False)
    # the chief has finished: the side-car finds every checkpoint at once and stops at max_steps
    record = run_sidecar_evaluator(config, model_dir=str(model_dir), runs_dir=str(runs_dir),
                                   options=SidecarOptions(timeout_s=1.0, poll_s=0.1))
    assert [e["step"] for e in record["evaluations"]] == [10, 20, 30, 40] and record["done"]
    assert record["run_dir"] == result.run_dir
    info = run_info(result.run_dir)
    assert [e["step"] for e in info["sidecar_evaluations"]] == [10, 20, 30, 40]
    assert info["sidecar_evaluations"][-1]["loss"] == pytest.approx(result.metrics["loss"], rel=1e-4)
    assert (model_dir / "eval_sidecar" / "sidecar_evaluations.json").is_file()
    # a run that ended before max_steps (here: the evaluator expects 80): it waits `timeout_s`
    # for a new checkpoint, sees the chief's run has ended, and stops after the last one
    from tpuestimator.config import load_config

    longer = load_config(config, ["train.max_steps=80"])
    record = run_sidecar_evaluator(longer, model_dir=str(model_dir), runs_dir=str(runs_dir),
                                   options=SidecarOptions(timeout_s=1.0, poll_s=0.1))
    assert [e["step"] for e in record["evaluations"]] == [10, 20, 30, 40] and record["done"]


def test_parameter_server_needs_a_tf_config_naming_the_chief_workers_and_ps(monkeypatch):
    from tpuestimator.devices import make_strategy

    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ConfigError) as err:
        make_strategy({"strategy": "parameter_server"})
    assert err.value.field == "run.strategy" and "TF_CONFIG" in str(err.value) and "tpuestimator cluster" in str(err.value)
    # a worker task never builds the strategy: it serves (cluster_roles.serve); asked to, it refuses
    cluster = cluster_spec(workers=1, ps=1)
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}}))
    with pytest.raises(ConfigError, match="this process as the chief"):
        make_strategy({"strategy": "parameter_server"})


def test_each_tf_config_task_gets_its_role(monkeypatch):
    from tpuestimator.cluster_roles import task_role

    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert task_role("parameter_server") == "train"
    cluster = cluster_spec(workers=1, ps=1, evaluator=True)
    roles = {}
    for kind in ("chief", "worker", "ps", "evaluator"):
        monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": kind, "index": 0}}))
        roles[kind] = (task_role("parameter_server"), task_role("multi_worker"))
    assert roles == {"chief": ("train", "train"), "worker": ("server", "train"), "ps": ("server", "train"),
                     "evaluator": ("evaluator", "evaluator")}


def test_bad_ps_settings_are_refused_by_the_config():
    from tpuestimator.config import load_config

    config = str(REPO / "tests" / "fixtures" / "parity" / "parity.yaml")
    cases = {"run.ps_steps_per_invocation=0": ">= 1", "run.ps_partition.max_shards=0": ">= 1",
             "run.strategy=ps": "'parameter_server'", "run.ps_partition.shards=2": "did you mean `max_shards`"}
    for override, expected in cases.items():
        with pytest.raises(ConfigError) as err:
            load_config(config, [override])
        assert err.value.field == override.split("=")[0] and expected in str(err.value)
