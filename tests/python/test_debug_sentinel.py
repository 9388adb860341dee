"""The NaN/Inf sentinel: stop within one loop, report + repro bundle, finite last checkpoint,
CLI exit status and run record, and `tpuestimator debug replay` naming the op."""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

# Two hidden layers at learning rate 1e10 overflow within two loops for any seed; SGD keeps
# no slots, so the checkpoint of the first loop is finite (Adam's second moments overflow
# in step 1: the sentinel then stops at the first loop, with no checkpoint yet).
LR_OVERRIDES = ["model=mlp", "params.optimizer=sgd", "params.learning_rate=1.0e+10", "params.hidden_units=[32, 32]",
                "train.max_steps=40", "train.iterations_per_loop=2", "train.save_checkpoints_steps=2",
                "eval.every_n_steps=null", "export.enabled=false", "run.model_dir=model"]


@pytest.fixture(scope="module")
def diverged(tmp_path_factory):
    """`tpuestimator train` with learning rate 1e10 (digits, 2-step loops): fails at step 4.

    The command runs in this process (`cli.main` with the argv a shell would pass, its exit
    code and printed lines captured): what is tested is the sentinel and what the command
    reports, not a process of its own; a TensorFlow start saved (the CLI's exit codes as a
    fresh process: test_main_command.py, test_cli_signals.py)."""
    from tpuestimator.cli import main
    from tpuestimator.examples import write_example

    root = tmp_path_factory.mktemp("sentinel")
    write_example("digits", root / "d")
    args = ["train", "d/digits.yaml", "--runs-dir", "runs"]
    for item in LR_OVERRIDES:
        args += ["--set", item]
    out, err = io.StringIO(), io.StringIO()
    before = os.getcwd()
    os.chdir(root)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(args)
    finally:
        os.chdir(before)
    return root, subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def _report(root: Path) -> tuple[Path, dict]:
    reports = sorted((root / "model" / "debug").glob("nonfinite-step-*"))
    assert len(reports) == 1, reports
    return reports[0], json.loads((reports[0] / "report.json").read_text())


def test_cli_stops_within_one_loop_and_exits_non_zero_with_the_report(diverged):
    root, proc = diverged
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "NaN or Inf" in proc.stderr and "report.txt" in proc.stderr and "debug replay" in proc.stderr
    report_dir, report = _report(root)
    first = report["first_nonfinite"]
    assert report["reproduced_on_host"] and first is not None
    # The sentinel stopped at the end of the loop holding the first non-finite step: within one loop.
    loop = report["failed_loop"]
    assert loop["first_step"] <= first["step"] <= loop["last_step"] == report["global_step"]
    assert loop["last_step"] - loop["first_step"] + 1 <= 2
    assert first["what"] in ("loss", "gradients", "weights")
    assert report["last_good_checkpoint"].endswith(f"ckpt-{loop['first_step'] - 1}")
    text = (report_dir / "report.txt").read_text()
    assert f"step {first['step']}" in text and "tpuestimator debug replay" in text
    bundle = report_dir / "bundle"
    for name in ("bundle.json", "config.yaml", "batch.tfrecord", "checkpoint"):
        assert (bundle / name).exists(), name
    # No checkpoint of the non-finite loop was written.
    steps = sorted(int(p.name.split("-")[1].split(".")[0]) for p in (root / "model").glob("ckpt-*.index"))
    assert steps and max(steps) < first["step"]


def test_run_record_shows_the_failure(diverged):
    root, _ = diverged
    (run_dir,) = [p for p in (root / "runs").iterdir() if p.is_dir()]
    error = json.loads((run_dir / "tfruns.d" / "error.json").read_text())
    assert "NonFiniteError" in error["message"] and "report.txt" in error["message"]
    assert (run_dir / "tfruns.d" / "properties" / "completed").read_text().strip() == "FALSE"
    assert json.loads((run_dir / "nonfinite" / "report.json").read_text())["error"] == "NonFiniteError"


def test_last_checkpoint_is_finite_and_loads(diverged):
    import tensorflow as tf

    from tpuestimator.jobs.from_config import build_estimator
    from tpuestimator.jobs.model_dir_jobs import load_job_config

    root, _ = diverged
    latest = tf.train.latest_checkpoint(str(root / "model"))
    reader = tf.train.load_checkpoint(latest)
    for name, _ in tf.train.list_variables(latest):
        value = reader.get_tensor(name)
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            assert np.all(np.isfinite(value)), name
    cfg = load_job_config(str(root / "model"))
    est = build_estimator(cfg, model_dir=str(root / "model"))
    from tpuestimator.jobs.from_config import input_fn_for

    metrics = est.evaluate(input_fn_for(cfg, "eval"), steps=1)  # builds the model and restores the checkpoint
    assert metrics["global_step"] == int(latest.rsplit("-", 1)[1])
    # (The weights are finite but huge after two steps at lr 1e10: the eval loss itself may overflow.)
    for v in est.model.weights:
        assert np.all(np.isfinite(v.numpy())), v.path


def test_debug_replay_names_the_op(diverged, monkeypatch, capsys):
    from tpuestimator.cli import main

    root, _ = diverged
    report_dir, report = _report(root)
    monkeypatch.chdir(root)
    capsys.readouterr()
    code = main(["debug", "replay", str(report_dir / "bundle"), "--json"])   # in this process: see `diverged`
    proc = subprocess.CompletedProcess([], code, *capsys.readouterr())
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["reproduced"] and result["step"] == report["first_nonfinite"]["step"]
    op = result["op"]
    assert op["op_type"] and op["op_name"] and op["kind"] in ("NaN", "Inf", "-Inf")
    assert op["source"]["line"] > 0 and op["source"]["file"].endswith(".py")


# ------------------------------------------------------------------ in process: a poisoned record
def log_model(params):
    """A model that takes the log of its input: a negative input value makes NaN in user code."""
    import keras
    import tensorflow as tf

    from tpuestimator.spec import ModelSpec

    inputs = keras.Input(shape=(4,), name="x")
    logs = keras.layers.Lambda(lambda t: tf.math.log(t), name="log")(inputs)  # the line replay must name
    logits = keras.layers.Dense(3, name="logits")(logs)
    return ModelSpec(model=keras.Model(inputs, logits),
                     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None),
                     optimizer=keras.optimizers.SGD(0.01))


def test_poisoned_batch_is_found_bundled_and_replayed_to_the_user_line(tmp_path):
    import inspect

    from helpers import array_input_fn
    from tpuestimator import Estimator, RunConfig
    from tpuestimator.debug.bundle import read_batches, read_json
    from tpuestimator.debug.replay import replay_bundle
    from tpuestimator.errors import NonFiniteError

    rng = np.random.RandomState(0)
    x = rng.uniform(0.5, 1.5, size=(64, 4)).astype("float32")
    y = rng.randint(0, 3, size=64).astype("int32")
    x[4 * 8 + 3, 2] = -1.0  # batch size 8: step 5 reads rows 32..39
    est = Estimator(log_model, RunConfig(model_dir=str(tmp_path / "m"), train_batch_size=8, iterations_per_loop=2,
                                         save_checkpoints_steps=2, strategy="cpu"))
    from tpuestimator.debug.sentinel import NonFiniteReportHook

    with pytest.raises(NonFiniteError) as info:
        est.train(array_input_fn(x, y), max_steps=20, hooks=[NonFiniteReportHook()])
    err = info.value
    assert err.step == 6 and err.report_path
    report = json.loads((Path(err.report_path) / "report.json").read_text())
    assert report["first_nonfinite"]["step"] == 5 and report["first_nonfinite"]["what"] == "loss"
    assert report["last_good_checkpoint"].endswith("ckpt-4")
    bundle = read_json(err.report_path)
    assert bundle["model"] == f"{__name__}:log_model"
    ((step, features, labels),) = read_batches(str(Path(bundle["_dir"]) / "batch.tfrecord"))
    assert step == 5
    np.testing.assert_array_equal(features["x"].numpy(), x[32:40])
    np.testing.assert_array_equal(labels.numpy(), y[32:40])

    result = replay_bundle(err.report_path)
    assert result["reproduced"] and result["op"]["op_type"] == "Log"
    assert result["op"]["kind"] == "NaN"
    user = result["op"]["user_source"]
    line = next(i for i, text in enumerate(inspect.getsource(log_model).splitlines())
                if "the line replay must name" in text) + log_model.__code__.co_firstlineno
    assert user["file"] == __file__ and user["line"] == line
    # Check-numerics was switched off again: the same step without it reports the loss.
    plain = replay_bundle(err.report_path, check_numerics=False)
    assert plain["reproduced"] and plain["what"] == "loss"


def test_optimizer_state_overflow_before_any_checkpoint_is_replayed_from_the_initial_weights(tmp_path):
    from helpers import array_input_fn, make_data
    from tpuestimator import Estimator, RunConfig
    from tpuestimator.errors import NonFiniteError

    x, y = make_data(512)
    est = Estimator("mlp", RunConfig(model_dir=str(tmp_path / "m"), train_batch_size=32, iterations_per_loop=3,
                                     save_checkpoints_steps=None, strategy="cpu"),
                    {"num_classes": 3, "learning_rate": 1e10, "hidden_units": [32, 32]})  # Adam
    from tpuestimator.debug.sentinel import NonFiniteReportHook

    with pytest.raises(NonFiniteError) as info:
        est.train(array_input_fn(x, y), max_steps=30, hooks=[NonFiniteReportHook()])
    err = info.value
    assert err.last_good_checkpoint is None and est.latest_checkpoint() is None  # nothing non-finite was saved
    report = json.loads((Path(err.report_path) / "report.json").read_text())
    assert report["reproduced_on_host"], report["note"]  # the initial weights were rebuilt exactly (seeded)
    assert report["replayed_from"].startswith("initial weights")
    first = report["first_nonfinite"]
    assert 1 <= first["step"] <= err.step <= 3
    assert report["nonfinite_variables"]  # the weights or Adam's moments at detection
