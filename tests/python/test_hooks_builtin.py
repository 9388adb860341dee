"""Built-in hooks: TensorBoard scalars (loop logs, report values, per-step host_call values),
HParams, checkpoint saving, profiling steps a..b, watching model outputs."""
from __future__ import annotations

import os

import numpy as np
import pytest

from helpers import array_input_fn, make_data


def report_model(params):
    """A linear classifier that reports its batch accuracy every step (ModelSpec.report)."""
    import keras
    import tensorflow as tf

    from tpuestimator.spec import ModelSpec

    inputs = keras.Input(shape=(20,), name="x")
    hidden = keras.layers.Dense(8, activation="relu", name="hidden")(inputs)
    logits = keras.layers.Dense(3, name="logits")(hidden)

    def batch_accuracy(labels, outputs):
        return tf.reduce_mean(tf.cast(tf.equal(tf.argmax(outputs, -1, output_type=tf.int32), labels), tf.float32))

    return ModelSpec(model=keras.Model(inputs, logits),
                     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None),
                     optimizer=keras.optimizers.SGD(0.1), report={"batch_accuracy": batch_accuracy},
                     predictions=lambda out: {"probabilities": tf.nn.softmax(out)})


def _estimator(tmp_path, **kw):
    from tpuestimator import Estimator, RunConfig

    cfg = dict(model_dir=str(tmp_path / "model"), train_batch_size=32, iterations_per_loop=5,
               save_checkpoints_steps=None, strategy="cpu")
    cfg.update(kw)
    return Estimator(report_model, RunConfig(**cfg))


def _scalars(logdir) -> dict:
    """{tag: [(step, value)]} of every TF2 scalar summary under `logdir` (one run folder)."""
    from tensorboard.backend.event_processing import event_accumulator

    acc = event_accumulator.EventAccumulator(str(logdir), size_guidance={"tensors": 0})
    acc.Reload()
    out = {}
    for tag in acc.Tags()["tensors"]:
        out[tag] = [(e.step, float(np.asarray(__import__("tensorflow").make_ndarray(e.tensor_proto))))
                    for e in acc.Tensors(tag)]
    return out


def test_summary_hook_writes_loop_logs_report_values_and_learning_rate(tmp_path):
    from tpuestimator.hooks.builtin import SummaryHook

    x, y = make_data(256)
    est = _estimator(tmp_path)
    hook = SummaryHook(str(tmp_path / "logs"))
    est.train(array_input_fn(x, y), max_steps=15, hooks=[hook])
    hook.end(15, {})
    scalars = _scalars(tmp_path / "logs" / "train")
    for tag in ("loss", "steps_per_sec", "examples_per_sec", "batch_accuracy", "learning_rate"):
        assert [s for s, _ in scalars[tag]] == [5, 10, 15], tag
    assert all(v > 0 for _, v in scalars["steps_per_sec"])
    assert all(0.0 <= v <= 1.0 for _, v in scalars["batch_accuracy"])
    assert scalars["learning_rate"][0][1] == pytest.approx(0.1)


def test_scalar_rows_are_written_alike_eagerly_and_by_the_traced_writer(tmp_path):
    """A few rows (the usual flush before an evaluation) are written with eager summary ops, a
    long run of rows by one traced function, and a set of names once traced stays traced: every
    (step, value) comes back from the event file as given, as a TensorBoard scalar."""
    import tensorflow as tf
    from tensorboard.backend.event_processing import event_accumulator

    from tpuestimator.hooks.builtin import ScalarRowsWriter

    writer = tf.summary.create_file_writer(str(tmp_path / "logs"))
    rows_writer = ScalarRowsWriter(writer)
    big = ScalarRowsWriter.EAGER_MAX_SCALARS // 2 + 1                    # rows of 2 names: over the bound
    expected = {"a": [], "b": [], "c": []}
    batches = [[(s, {"a": s / 7, "b": -s}) for s in range(1, 4)],        # eager
               [(s, {"c": s * 0.5}) for s in range(4, 6)],                # other names, eager
               [(s, {"a": s / 7, "b": -s}) for s in range(6, 6 + big)],   # traced
               [(s, {"a": s / 7, "b": -s}) for s in range(6 + big, 8 + big)]]  # a, b stay traced
    for batch in batches:
        rows_writer.write(batch)
        for step, values in batch:
            for name, value in values.items():
                expected[name].append((step, float(np.float32(value))))
    assert list(rows_writer._fns) == [("a", "b")]
    writer.flush()
    assert _scalars(tmp_path / "logs") == expected
    acc = event_accumulator.EventAccumulator(str(tmp_path / "logs"), size_guidance={"tensors": 0})
    acc.Reload()
    assert {tag: acc.SummaryMetadata(tag).plugin_data.plugin_name for tag in expected} == dict.fromkeys(expected, "scalars")


@pytest.mark.parametrize("replicas", [1, 8])
def test_host_call_hook_writes_every_step_and_costs_nothing_when_off(tmp_path, replicas):
    from tpuestimator.hooks.host_call import HostCallHook

    x, y = make_data(256)
    # 8 = every logical CPU of the test session: TensorFlow's collectives cannot mix replica
    # groups of different sizes in one process, and the other multi-replica tests use 8.
    est = _estimator(tmp_path, strategy="mirrored" if replicas == 8 else "cpu")
    assert est.num_replicas == replicas
    loop_logs = []
    est.train(array_input_fn(x, y), max_steps=5, hooks=[lambda e, i: loop_logs.append(i) if e == "after_loop" else None])
    assert est.trainer.per_step_buffers is None  # no HostCallHook: the default loop, no buffers
    calls = []
    hook = HostCallHook(str(tmp_path / "logs"), fn=lambda step, values: calls.append((step, values)),
                        keep_history=True)
    est.train(array_input_fn(x, y), max_steps=17,
              hooks=[hook, lambda e, i: loop_logs.append(i) if e == "after_loop" else None])
    hook.close()
    assert [s for s, _ in calls] == list(range(6, 18))
    assert all(set(v) == {"loss", "batch_accuracy"} for _, v in calls)
    # The per-step values average to the loop's mean loss (loops 6..10, 11..15, 16..17).
    for log, (lo, hi) in zip(loop_logs[1:], [(6, 10), (11, 15), (16, 17)]):
        steps = [v["loss"] for s, v in calls if lo <= s <= hi]
        assert log["loss"] == pytest.approx(float(np.mean(steps)), rel=1e-5)
    scalars = _scalars(tmp_path / "logs" / "train")
    assert [s for s, _ in scalars["step/loss"]] == list(range(6, 18))
    assert [v for _, v in scalars["step/loss"]] == pytest.approx([v["loss"] for _, v in calls])


def test_checkpoint_saver_hook_saves_at_loop_boundaries(tmp_path):
    from tpuestimator.core.stopping import CheckpointSaverHook

    x, y = make_data(256)
    est = _estimator(tmp_path, iterations_per_loop=2, keep_checkpoint_max=20)
    hook = CheckpointSaverHook(every_n_steps=3)
    est.train(array_input_fn(x, y), max_steps=10, hooks=[hook], save_final_checkpoint=False)
    steps = [int(p.rsplit("-", 1)[1]) for p in hook.saved]
    assert steps == [4, 6, 10]  # the first boundary at or after each multiple of 3 (loops end at even steps)
    with pytest.raises(ValueError):
        CheckpointSaverHook()


def test_profiler_hook_profiles_exactly_the_steps_asked(tmp_path):
    from tpuestimator.hooks.profiler import ProfilerHook

    x, y = make_data(256)
    est = _estimator(tmp_path, iterations_per_loop=10)
    loops = []
    hook = ProfilerHook(str(tmp_path / "logs"), [3, 4])
    est.train(array_input_fn(x, y), max_steps=12,
              hooks=[hook, lambda e, i: loops.append((i["step"] - i["steps"], i["step"])) if e == "after_loop" else None])
    assert loops == [(0, 2), (2, 4), (4, 12)]
    assert hook.profiled == (3, 4)
    found = [f for _, _, files in os.walk(tmp_path / "logs" / "plugins" / "profile") for f in files]
    assert any(f.endswith(".xplane.pb") for f in found)


def test_a_profiler_window_stops_where_training_pauses_for_an_evaluation(tmp_path):
    """train_and_evaluate runs one controller; the window [3, 6] crosses the evaluation at step 4:
    the trace stops there (`before_eval`), as it did when each segment ended with `end`."""
    from tpuestimator.core.training import EvalSpec, TrainSpec, train_and_evaluate
    from tpuestimator.hooks.profiler import ProfilerHook

    x, y = make_data(256)
    est = _estimator(tmp_path, iterations_per_loop=10)
    hook = ProfilerHook(str(tmp_path / "logs"), [3, 6])
    out = train_and_evaluate(est, TrainSpec(input_fn=array_input_fn(x, y), max_steps=8, hooks=[hook]),
                             EvalSpec(input_fn=array_input_fn(x, y), every_n_steps=4))
    assert [h["step"] for h in out.history] == [4, 8]
    assert hook.profiled == (3, 4) and not hook.active


@pytest.mark.quick("hooks", "spec")
def test_watch_hook_logs_first_values_first_n_times(tmp_path):
    from tpuestimator.errors import ConfigError
    from tpuestimator.hooks.watch import WatchHook

    x, y = make_data(256)
    est = _estimator(tmp_path)
    lines = []
    hook = WatchHook(["probabilities", "hidden"], first_n=2, summarize=4, every_n_loops=2, log=lines.append, keep=True)
    est.train(array_input_fn(x, y), max_steps=30, hooks=[hook])  # 6 loops: logged after loops 2 and 4 only
    assert [step for step, _ in hook.records] == [10, 20]
    step, values = hook.records[0]
    assert values["probabilities"].shape == (32, 3) and values["hidden"].shape == (32, 8)
    np.testing.assert_allclose(values["probabilities"].sum(-1), 1.0, rtol=1e-5)
    assert len(lines) == 4 and lines[0].startswith("watch | step:      10 | probabilities [32, 3] float32: [")
    shown = lines[0].split("[", 2)[2].split("]")[0].replace(" ...", "").split()
    np.testing.assert_allclose([float(v) for v in shown], values["probabilities"].reshape(-1)[:4], rtol=1e-5)
    bad = WatchHook(["nope"])
    with pytest.raises(ConfigError, match="debug.watch.outputs"):
        est.train(array_input_fn(x, y), max_steps=35, hooks=[bad])


def test_job_writes_hparams_and_watch_and_profile_from_the_config(tmp_path, caplog):
    import logging

    from tensorboard.backend.event_processing import event_accumulator

    from tpuestimator.examples import write_example
    from tpuestimator.jobs.job import run_job

    cfg = write_example("digits", tmp_path / "d")
    with caplog.at_level(logging.INFO, logger="tpuestimator"):
        result = run_job(cfg, overrides=["model=linear", "train.max_steps=6", "train.iterations_per_loop=2",
                                         "train.batch_size=16", "eval.every_n_steps=null", "export.enabled=false",
                                         f"run.model_dir={tmp_path / 'model'}",
                                         "debug.watch={outputs: [class_id], first_n: 1, summarize: 5}",
                                         "debug.profile_steps=[2, 2]"],
                         runs_dir=str(tmp_path / "runs"))
    logs = os.path.join(result.run_dir, "logs")
    acc = event_accumulator.EventAccumulator(logs, size_guidance={"tensors": 0})
    acc.Reload()
    tags = acc.Tags()["tensors"]
    assert "_hparams_/session_start_info" in tags and "accuracy" in tags
    watch = [r.getMessage() for r in caplog.records if r.getMessage().startswith("watch |")]
    assert len(watch) == 1 and "class_id [16] int32" in watch[0]
    assert any(f.endswith(".xplane.pb") for _, _, files in os.walk(os.path.join(logs, "plugins", "profile"))
               for f in files)


def test_train_lines_show_the_latest_held_out_loss_beside_the_training_loss(tmp_path, caplog):
    # Issue 34: a training loss that looks fine while the held-out one is far worse must show on
    # the progress line itself. Evaluations every 10 steps, loops of 5: the train lines before
    # the first evaluation have no eval loss, each one after it the latest evaluation's loss,
    # in the log line (the CLI) and in the progress events (R's line).
    import logging

    from tpuestimator.core.training import EvalSpec, TrainSpec, train_and_evaluate
    from tpuestimator.hooks.builtin import LoggingHook, ProgressCallbackHook

    x, y = make_data(96)
    events: list[tuple[str, dict]] = []
    hooks = [LoggingHook(), ProgressCallbackHook(lambda event, info: events.append((event, dict(info))), 20)]
    with caplog.at_level(logging.INFO, logger="tpuestimator.hooks.builtin"):
        train_and_evaluate(_estimator(tmp_path), TrainSpec(input_fn=array_input_fn(x, y), max_steps=20, hooks=hooks),
                           EvalSpec(input_fn=array_input_fn(x[:64], y[:64]), every_n_steps=10))
    lines = [r.getMessage() for r in caplog.records]
    train = {int(m.split("step:")[1].split("|")[0]): m for m in lines if m.startswith("train")}
    evals = {int(m.split("step:")[1].split("|")[0]): m for m in lines if m.startswith("eval")}
    assert sorted(train) == [5, 10, 15, 20] and sorted(evals) == [10, 20]
    eval_loss = {e["step"]: e["metrics"]["loss"] for kind, e in events if kind == "eval"}
    assert "eval loss" not in train[5] and "eval loss" not in train[10]
    # the columns in order: training loss, then the held-out loss of step 10's evaluation
    assert f"| loss: {float(train[15].split('| loss: ')[1].split(' |')[0]):.4f} | eval loss: {eval_loss[10]:.4f} |" \
        in train[15], train[15]
    assert f"loss: {eval_loss[10]:.4f}" in evals[10]
    loops = {info["step"]: info for kind, info in events if kind == "loop"}
    assert "eval_loss" not in loops[5] and "eval_loss" not in loops[10]
    assert loops[15]["eval_loss"] == pytest.approx(eval_loss[10]) and loops[20]["eval_loss"] == pytest.approx(eval_loss[10])
    assert eval_loss[10] != pytest.approx(loops[15]["loss"])  # a held-out loss, not the training one again
