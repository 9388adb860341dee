"""The tf.data service: `data.service` feeds training from real service workers on 127.0.0.1.

One `tpuestimator data serve --dispatcher 0 --workers 2` process serves the whole file (a
session fixture); the last test stops it with Ctrl-C (SIGINT) and checks it exits cleanly.
"""
from __future__ import annotations

import collections
import math
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tpuestimator.config import load_config
from tpuestimator.data import service as data_service
from tpuestimator.data import spec as specs
from tpuestimator.data import write_tfrecords
from tpuestimator.data.pipeline import build_dataset, make_input_fn
from tpuestimator.data.service import start_local_service
from tpuestimator.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
RECORDS = 48
SHARDS = 4


@pytest.fixture(scope="session")  # session: one server although the slow test runs first, apart from the rest
def served(forked_python):
    """(address, process) of `tpuestimator data serve` with 2 workers on free ports."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    # forked_python: a process of its own (Ctrl-C, its exit code) without its TensorFlow import (conftest.py)
    proc = subprocess.Popen([forked_python, "-m", "tpuestimator", "data", "serve", "--dispatcher", "0",
                             "--workers", "2"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)
    lines = []
    for line in proc.stdout:  # TensorFlow's start-up log lines first, then the address
        lines.append(line)
        if line.startswith("tf.data service at "):
            break
    else:
        proc.wait()
        pytest.fail("`tpuestimator data serve` did not start:\n" + "".join(lines))
    yield lines[-1].split()[3], proc
    if proc.poll() is None:  # the last test stops it; this only cleans up after a failure
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """4 shards of 12 examples: `n` the example id, `x` separable into 2 classes by its sign."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(RECORDS, 4)).astype(np.float32)
    labels = (x[:, 0] + x[:, 1] > 0).astype(int).tolist()
    manifest = write_tfrecords({"x": x, "n": np.arange(RECORDS)}, tmp_path_factory.mktemp("svc") / "data",
                               labels=labels, split=0, shards=SHARDS)
    return manifest["path"]


def ids_through_the_service(manifest, address, sharding, job):
    section = specs.resolve_section({"manifest": manifest, "service": address, "service_sharding": sharding})
    ds = build_dataset(section, "eval", specs.pattern_for(section, "train"), batch_size=4, service_job=job)
    return collections.Counter(int(i) for features, _ in ds for i in features["n"].numpy())


def test_dynamic_sharding_sees_each_example_exactly_once_per_epoch(served, records):
    address, _ = served
    once = ids_through_the_service(records, address, "dynamic", "once-per-epoch")
    assert sorted(once) == list(range(RECORDS)) and set(once.values()) == {1}
    # Static sharding by worker index (the dispatcher `data serve` started lists its workers).
    by_file = ids_through_the_service(records, address, "file", "static-by-file")
    assert sorted(by_file) == list(range(RECORDS)) and set(by_file.values()) == {1}
    # Sharding off: both workers run the whole pipeline, every example arrives twice.
    twice = ids_through_the_service(records, address, "off", "every-worker")
    assert sorted(twice) == list(range(RECORDS)) and set(twice.values()) == {2}


@pytest.mark.parametrize("wire_bytes", [None, 60])
def test_training_pipeline_reads_batches_from_the_service(served, records, monkeypatch, wire_bytes):
    address, _ = served
    if wire_bytes:  # 24 bytes per example (x 4 floats, n, label): pieces of 2 examples joined into batches of 8
        monkeypatch.setattr(data_service, "WIRE_BYTES", wire_bytes)
    section = {"manifest": records, "service": address, "service_sharding": "dynamic", "shuffle_buffer": 8}
    ds = make_input_fn(section, "train")({"batch_size": 8, "seed": 3})
    assert ds.element_spec[0]["x"].shape == (8, 4)  # static, as TPUs need
    seen = collections.Counter()
    for features, labels in ds.take(3 * RECORDS // 8):  # three epochs' worth of static batches
        assert features["x"].shape == (8, 4) and labels.shape == (8,)
        seen.update(int(i) for i in features["n"].numpy())
    assert set(seen) == set(range(RECORDS))  # every example reached training (repeat, shuffle, decode on workers)


@pytest.mark.slow
def test_a_training_run_fed_by_two_service_workers(served, records, tmp_path):
    from tpuestimator.jobs.job import run_job

    address, _ = served
    config = {"model": "linear", "params": {"learning_rate": 0.1},
              "data": {"manifest": records, "service": address, "shuffle_buffer": 16,
                       "eval": os.path.join(os.path.dirname(records), "train*")},  # evaluated locally
              "train": {"batch_size": 8, "max_steps": 60, "iterations_per_loop": 20, "save_checkpoints_steps": 60},
              "eval": {"batch_size": 16}}
    result = run_job(config, model_dir=str(tmp_path / "model"), record=False, export=False)
    assert result.global_step == 60
    loss = result.metrics["loss"]
    assert math.isfinite(loss) and loss < 0.6, result.metrics  # chance is ln 2 = 0.69 (2 balanced classes)
    # Where the input runs is not what is trained: the same job without the service resumes.
    from tpuestimator.jobs.modeldir import check_model_dir

    local = dict(config, data={k: v for k, v in config["data"].items() if k != "service"},
                 train={**config["train"], "max_steps": 80})
    assert check_model_dir(load_config(local), str(tmp_path / "model")) == 60


def test_bad_service_settings_are_config_errors(records):
    base = {"model": "linear", "data": {"manifest": records}}
    for value in ("localhost:5050", "grpc://localhost", "http://localhost:5050"):
        with pytest.raises(ConfigError, match=r"data\.service.*grpc://HOST:PORT"):
            load_config(base, [f"data.service={value}"])
    with pytest.raises(ConfigError, match=r"data\.service_sharding.*'dynamic'"):
        load_config(base, ["data.service_sharding=files"])
    assert load_config(base, ["data.service=grpc://localhost:5050"]).data.service == "grpc://localhost:5050"


def test_serving_on_a_busy_port_is_a_clear_error():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        busy = sock.getsockname()[1]
        with pytest.raises(ConfigError, match=rf"--dispatcher.*{busy}.*a free port"):
            start_local_service(dispatcher_port=busy, workers=1)
        with pytest.raises(ConfigError, match="--join"):
            start_local_service(workers=1, join="localhost:5050")


def test_data_serve_stops_cleanly_on_ctrl_c(served):
    _, proc = served
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    # the servers stopped: not the line of a stop that ran out of time ("... stopped without waiting")
    assert "tf.data service stopped" in out.splitlines(), out


def test_sharding_off_unseeds_the_shuffle_so_workers_differ():
    """With sharding off every worker runs the same pipeline graph: a seeded window shuffle
    would give every worker the same batches; the unseeded one draws its seeds at run time."""
    import tensorflow as tf

    from tpuestimator.data.epochs import shuffled_batches

    def first_batches(seed):
        ds = shuffled_batches(lambda epoch: tf.data.Dataset.range(64).batch(16), window=32, batch_size=8, seed=seed)
        return [batch.numpy().tolist() for batch in ds.take(4)]

    assert first_batches(7) == first_batches(7)
    assert first_batches(None) != first_batches(None)


def test_job_names_shared_by_the_processes_of_one_training_only():
    import tensorflow as tf

    def name(pipeline_id=None, *, pipelines=2, seed=5, **section):
        ctx = None if pipeline_id is None else tf.distribute.InputContext(pipelines, pipeline_id, pipelines)
        return data_service.job_name(specs.DataSpec(format="mnist", **section), pattern="/data/train-*", seed=seed, input_context=ctx)

    assert name(0) == name(1)  # multi-worker trainers join one job: the service splits it between them
    assert name(0) != name(0, seed=6)  # a resumed run (seed + start step) starts a new job
    assert name() != name()  # one process: a fresh job per run, never another run's
    assert name(0, service_job="shared") == name(service_job="shared") == "shared"


def test_a_stop_that_hangs_still_ends_the_serve_process():
    """`data serve` must end on Ctrl-C even when the servers' stop never returns (it waits
    `SERVE_STOP_SECONDS`, then leaves without them); a stop that returns is reported as usual."""
    script = """if True:
        import sys, threading
        from tpuestimator.commands.data import stop_service

        class Service:
            def __init__(self, hang):
                self.hang, self.stopped = hang, False
            def stop(self):
                if self.hang:
                    threading.Event().wait()  # never returns
                self.stopped = True

        quick = Service(hang=False)
        assert stop_service(quick, timeout=30) == 0 and quick.stopped
        print("quick stop returned", flush=True)
        stop_service(Service(hang=True), timeout=1)
        print("not reached", flush=True)
    """
    env = {**os.environ, "PYTHONPATH": str(REPO / "python") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [
        "tf.data service stopped", "quick stop returned",
        "tf.data service stopped without waiting: its servers did not finish stopping within 1 s "
        "(readers may still be connected)"], proc.stdout


def _dataset_definitions(work_dir: Path):
    """The GraphDefs a dispatcher with `work_dir` stored for its workers: one file per
    registered dataset, a TFRecord of one DatasetDef, whose field 1 is the GraphDef."""
    import tensorflow as tf
    from google.protobuf.internal.decoder import _DecodeVarint
    from tensorflow.core.framework.graph_pb2 import GraphDef

    for path in sorted((work_dir / "datasets").iterdir()):
        [raw] = [record.numpy() for record in tf.data.TFRecordDataset(str(path))]
        assert raw[0] == 0x0A, f"{path}: not a DatasetDef holding a graph"
        length, start = _DecodeVarint(raw, 1)
        yield GraphDef.FromString(raw[start:start + length])


def test_the_workers_run_the_pipeline_without_the_autotuning_model(records, tmp_path):
    """A worker's stop waited for each task's tf.data autotuning thread to wake by itself (up to
    60 s: `data serve`'s Ctrl-C after a training, `worker_pipeline`): the pipeline the workers
    receive has autotuning off, read from what the dispatcher stored for them."""
    import tensorflow as tf
    from tensorflow.core.framework.dataset_options_pb2 import Options

    dispatcher = tf.data.experimental.service.DispatchServer(
        tf.data.experimental.service.DispatcherConfig(port=0, work_dir=str(tmp_path / "dispatcher")))
    worker = tf.data.experimental.service.WorkerServer(
        tf.data.experimental.service.WorkerConfig(dispatcher_address=dispatcher.target.split("://")[1]))
    try:
        section = {"manifest": records, "service": dispatcher.target, "shuffle_buffer": 8}
        features, _ = next(iter(make_input_fn(section, "train")({"batch_size": 8, "seed": 3})))
        assert features["x"].shape == (8, 4)
    finally:
        worker.stop()
        dispatcher.stop()
    [graph] = _dataset_definitions(tmp_path / "dispatcher")
    settings = [Options.FromString(node.attr["serialized_options"].s) for node in graph.node
                if node.op == "OptionsDataset"]
    autotune = [o.autotune_options.enabled for o in settings if o.autotune_options.HasField("enabled")]
    assert autotune == [False], settings   # set once, off; nothing turns it back on
    # the rest of the pipeline's options still reach the workers
    assert any(o.optimization_options.map_parallelization for o in settings), settings
