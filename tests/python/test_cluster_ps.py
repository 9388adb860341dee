"""Parameter-server training and the side-car evaluator on real local clusters: the user's own
`tpuestimator cluster --workers 2 --ps 1 --evaluator CONFIG` command (each task a `tpuestimator
train` process on 127.0.0.1 with its own TF_CONFIG, as on separate machines, but on one host)."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from helpers import WITHOUT_SKLEARN, without_sklearn
from tpuestimator.cluster.layout import ClusterShape, cluster_layout
from tpuestimator.cluster.sidecar import SidecarOptions, run_sidecar_evaluator
from tpuestimator.errors import ConfigError
from tpuestimator.runs import run_info

pytestmark = pytest.mark.real_process  # TPUESTIMATOR_STRESS=N repeats these (conftest.py)

REPO = Path(__file__).resolve().parents[2]
NUM_IDS, STEPS, BATCH = 4096, 60, 16


def _ids_job(tmp_path) -> str:
    """A config and its data: examples with a distinct `id` each (0..4095, 5% held out for
    evaluation) and a feature `x` that tells the 2 classes apart; the model
    (`cluster_models.counted_ids`) counts on the ps how often each id was trained. 60 steps of
    16 read at most 1920 stream positions of one worker's copy (should one worker run them all):
    less than one epoch, so no id comes twice in the stream."""
    import numpy as np

    from tpuestimator.data.writers import write_tfrecords

    rng = np.random.RandomState(0)
    labels = rng.randint(0, 2, NUM_IDS)
    x = (rng.randn(NUM_IDS, 4) + 1.5 * labels[:, None]).astype("float32")
    write_tfrecords({"id": np.arange(NUM_IDS, dtype="int64"), "x": x, "label": labels}, tmp_path / "data",
                    split=0.05, label="label")
    config = {"name": "ids", "model": "cluster_models:counted_ids", "params": {"num_ids": NUM_IDS},
              "data": {"manifest": str(tmp_path / "data" / "manifest.json")},
              "train": {"batch_size": BATCH, "max_steps": STEPS, "iterations_per_loop": 20, "save_checkpoints_steps": 20},
              "eval": {"batch_size": 64, "every_n_steps": 20},
              "run": {"strategy": "parameter_server", "ps_steps_per_invocation": 5, "seed": 1},
              "export": {"enabled": False}}
    path = tmp_path / "ids.json"
    path.write_text(json.dumps(config))
    return str(path)


def _env() -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    # tests/python: the tasks load `model: cluster_models:counted_ids`
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "python"), str(Path(__file__).parent), env.get("PYTHONPATH", "")])
    env.pop("TF_CONFIG", None)
    return without_sklearn(env)  # as on the core install: each task starts 2 CPU s sooner


def _addresses(shape: ClusterShape) -> dict:
    return cluster_layout(shape, lambda kind, index: f"127.0.0.1:{2000 + 10 * len(kind) + index}")


@pytest.mark.slow
def test_parameter_servers_train_asynchronously_without_overlap_and_a_sidecar_evaluates_every_checkpoint(
        tmp_path, forked_python):
    config = _ids_job(tmp_path)
    model_dir, runs_dir = tmp_path / "model", tmp_path / "runs"
    # every task ends by itself: the chief when training is done, the evaluator after the final
    # checkpoint; the launcher then stops the ps and worker servers. forked_python: the command and
    # its 5 tasks (`sys.executable`) are real processes without their TensorFlow import (~6 CPU s
    # each; conftest.py)
    done = subprocess.run(
        [forked_python, "-m", "tpuestimator", "cluster", "--workers", "2", "--ps", "1", "--evaluator", config,
         "--model-dir", str(model_dir), "--runs-dir", str(runs_dir)],
        env=_env(), cwd=str(tmp_path), capture_output=True, text=True, timeout=400)
    out = done.stdout
    assert done.returncode == 0, out[-4000:] + done.stderr[-3000:]
    assert "cluster finished: 2 worker(s), 1 ps and an evaluator" in out
    for task in ("chief 0", "worker 0", "worker 1", "ps 0", "evaluator 0"):
        assert f"[{task}] " in out, task  # each task's log, prefixed with its name

    (run_dir,) = [p for p in runs_dir.iterdir() if not p.name.startswith(".")]
    assert f"[chief 0] run record:  {run_dir}" in out
    info = run_info(str(run_dir))
    props = info["properties"]
    assert info["status"] == "completed" and props["strategy"] == "parameter_server"
    # The global step counts the steps of both workers: each ran some of the scheduled functions.
    by_worker = dict(item.split(":") for item in props["ps_steps_by_worker"].split(","))
    assert set(by_worker) == {"0", "1"} and all(int(n) > 0 for n in by_worker.values()), by_worker
    assert sum(int(n) for n in by_worker.values()) == props["global_step"] == STEPS
    # Asynchronous updates still learn: the evaluation loss (on the coordinator) falls.
    metrics = info["metrics"]  # a row per loop; the evaluations' values at their loops' rows
    evaluated = [(x, v) for x, v in zip(metrics["epoch"], metrics["val_loss"]) if v is not None]
    assert [x for x, _ in evaluated] == [20, 40, 60]
    val_loss = [v for _, v in evaluated]
    assert val_loss[-1] < val_loss[0] and metrics["loss"][-1] < metrics["loss"][0]
    # Checkpoints were written by the chief alone.
    written = sorted(int(p.name.split("-")[1].split(".")[0]) for p in model_dir.glob("ckpt-*.index"))
    assert written == [20, 40, 60] and not list(model_dir.glob(".worker_*"))
    # The side-car (same --model-dir and --runs-dir as every task) evaluated every checkpoint the
    # chief wrote, into the chief's run record; its numbers are the coordinator's own
    # evaluations of the same checkpoints.
    sidecar = info["sidecar_evaluations"]
    eval_count = json.loads((tmp_path / "data" / "manifest.json").read_text())["splits"]["eval"]["count"]
    assert [e["step"] for e in sidecar] == written
    for row, evaluation in zip(range(3), sidecar):
        assert evaluation["loss"] == pytest.approx(val_loss[row], rel=1e-4)
        assert evaluation["num_examples"] == eval_count
    assert "[evaluator 0] side-car evaluator: evaluated the checkpoints of steps 20, 40, 60" in out
    # The workers shared one stream of batches without overlap: every trained id was trained
    # once, and as many ids were trained as steps x batch (two workers training the same
    # batches would count each of their ids twice).
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(model_dir / "ckpt-60"))
    (key,) = [k for k in reader.get_variable_to_shape_map() if "seen" in k and "OPTIMIZER" not in k]
    seen = reader.get_tensor(key)
    assert seen.max() == 1 and int(seen.sum()) == STEPS * BATCH, (seen.max(), seen.sum())
    # The checkpoint's optimizer counted every step too (its learning rate and Adam's bias
    # correction read it; `workarounds.atomic_optimizer_counters`).
    assert reader.get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE") == STEPS


# 100 steps of 16 examples, 5 steps per scheduled function, 2 loops of 50: both workers run at
# once all along (ps_in_process_cluster.py)
COUNT_STEPS, COUNT_BATCH = 100, 16


@pytest.fixture(scope="module")
def in_process_cluster(tmp_path_factory, forked_python, stress_round) -> dict:
    """What ps_in_process_cluster.py found on its cluster of 2 workers and 2 ps tasks (servers in
    the chief's process: one TensorFlow start for the two tests that read it; the ps/worker role
    of `tpuestimator train` in processes of their own is the test above). Again in each round of
    stress mode (`stress_round`)."""
    script = Path(__file__).with_name("ps_in_process_cluster.py")
    env = dict(_env(), PYTHONPATH=os.pathsep.join([WITHOUT_SKLEARN, str(REPO / "python"), str(script.parent)]))
    done = subprocess.run([forked_python, str(script), str(COUNT_STEPS), str(COUNT_BATCH), "5", "50"], env=env,
                          cwd=str(tmp_path_factory.mktemp("ps")), capture_output=True, text=True, timeout=400)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    assert done.returncode == 0 and len(lines) == 1, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(lines[0][len("RESULT "):])


@pytest.mark.slow
def test_ps_partition_shards_variables_and_a_trainable_embedding_over_two_ps_tasks(in_process_cluster):
    result = in_process_cluster
    assert result["strategy"] == "parameter_server"
    assert result["big_type"] == "ShardedVariable" and result["big_shapes"] == [[500, 64], [500, 64]]
    assert [d.split("/device")[0] for d in result["big_devices"]] == ["/job:ps/replica:0/task:0", "/job:ps/replica:0/task:1"]
    assert result["small_type"] != "ShardedVariable"  # under min_shard_bytes: one piece
    # Keras 3 cannot update a sharded weight of an ordinary layer: a clear error before training,
    # naming the field and the layer that shards its table itself.
    assert "run.ps_partition" in result["trainable_sharding"] and "logits/kernel (2 shards)" in result["trainable_sharding"]
    assert "sharded_embedding" in result["trainable_sharding"]
    # a non-trainable Keras weight too: a checkpoint cannot save one made of shards
    assert "counter/counts (2 shards)" in result["non_trainable_sharding"]
    # The embedding layer's table: 2 row shards of 1000 x 16, one on each ps task, trained (the
    # loss falls from chance to near zero: only the embedding separates odd ids from even ones),
    # checkpointed, with the optimizer's slots beside each shard.
    shards = result["embedding_shards"]
    assert [s[1:] for s in shards] == [[1000, 16], [1000, 16]]
    # consecutive shards on consecutive ps tasks (where the strategy's round-robin stands): one on each
    assert sorted(s[0].split("/device")[0] for s in shards) == ["/job:ps/replica:0/task:0", "/job:ps/replica:0/task:1"]
    assert result["embedding_loss_before"] > 0.6 and result["embedding_loss_after"] < 0.1, result
    assert result["embedding_checkpoint"] == "ckpt-60"
    assert [d.split("/device")[0] for d in result["slot_devices"]] == ["/job:ps/replica:0/task:0",
                                                                       "/job:ps/replica:0/task:1"]


@pytest.mark.slow
def test_sidecar_evaluator_of_a_single_chief_evaluates_every_checkpoint(tmp_path, fixtures_dir):
    from tpuestimator.jobs.job import run_job

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


def test_parameter_server_needs_a_tf_config_naming_the_chief_workers_and_ps(monkeypatch, tmp_path):
    from tpuestimator.core.devices import make_strategy
    from tpuestimator.core.run_config import RunConfig

    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ConfigError) as err:
        make_strategy(RunConfig(model_dir=str(tmp_path), strategy="parameter_server"))
    assert err.value.field == "run.strategy" and "TF_CONFIG" in str(err.value) and "tpuestimator cluster" in str(err.value)
    # a worker task never builds the strategy: it serves (cluster.tasks.serve); asked to, it refuses
    cluster = _addresses(ClusterShape(workers=1, ps=1))
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}}))
    with pytest.raises(ConfigError, match="this process as the chief"):
        make_strategy(RunConfig(model_dir=str(tmp_path), strategy="parameter_server"))


def test_each_tf_config_task_gets_its_duty():
    from tpuestimator.cluster.tasks import task_duty

    assert task_duty("parameter_server", environ={}) == "train"
    cluster = _addresses(ClusterShape(workers=1, ps=1))
    roles = {}
    for kind in ("chief", "worker", "ps", "evaluator"):
        environ = {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": kind, "index": 0}})}
        roles[kind] = (task_duty("parameter_server", environ), task_duty("multi_worker", environ))
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


def test_sharded_embedding_without_parameter_servers_is_a_plain_embedding():
    """Outside a partitioned ParameterServerStrategy the layer keeps one table (a model function
    can use it everywhere); 'div' row shards give the first rows % shards shards one row more."""
    import numpy as np
    import tensorflow as tf

    from tpuestimator.models.embedding import sharded_embedding
    from tpuestimator.models.partitioning import row_split, shard_count

    assert row_split(2000, 2) == [1000, 1000] and row_split(10, 3) == [4, 3, 3]
    assert shard_count(tf.distribute.get_strategy(), (2000, 16), "float32") == 1
    layer = sharded_embedding(50, 4, name="emb")
    ids = np.array([[0, 7], [49, 3]], dtype="int64")
    rows = layer(ids)
    assert layer.shards is None and [w.path for w in layer.weights] == ["emb/embeddings"]
    np.testing.assert_allclose(rows.numpy(), tf.gather(layer.embeddings, ids).numpy())


@pytest.mark.slow
def test_parameter_servers_lose_no_example_of_the_loss_metric_and_no_step_of_the_optimizer(in_process_cluster):
    """Two workers update the loss metric's variables and the optimizer's step counter on the ps
    at once: each update must be one addition on the ps (`steps.add_to_metric`,
    `workarounds.atomic_optimizer_counters`). With Keras's own `update_state` and
    `iterations.assign_add` (a read, then a write) a third of the examples went uncounted and
    the optimizer counted 72-83 of the 100 steps here, its learning-rate schedule lagging
    (docs/scaling-out.md, Parameter servers)."""
    out = in_process_cluster["metric_count"]
    assert out["global_step"] == COUNT_STEPS and set(out["steps_by_worker"]) == {"0", "1"}, out
    # read after each loop, before the trainer resets the metric: every loop's examples, exactly
    assert out["loss_counts"] == [50.0 * COUNT_BATCH, 50.0 * COUNT_BATCH], out
    # Adam's bias correction and the schedule read the optimizer's count: every step, exactly
    assert out["optimizer_iterations"] == COUNT_STEPS, out
    assert out["learning_rate"] == out["schedule_at_global_step"], out


def test_add_to_metric_updates_a_mean_as_keras_does():
    """`add_to_metric` (one addition per variable) ends where Keras's `update_state` does, for
    the values a loss and a report give: per-example vectors, scalars, [batch, k] arrays."""
    import keras
    import numpy as np

    from tpuestimator.core.steps import add_to_metric

    ours, keras_own = keras.metrics.Mean(), keras.metrics.Mean()
    for values in (np.array([1.0, 2.0, 6.0]), np.float32(4.0), np.arange(6, dtype="float32").reshape(3, 2)):
        add_to_metric(ours, values)
        keras_own.update_state(values)
    assert [float(v.numpy()) for v in ours.variables] == [float(v.numpy()) for v in keras_own.variables] == [20.5, 7.0]
