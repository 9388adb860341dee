"""tpuestimator.porting: TPUEstimator's eval_metrics, host_call, SessionRunHooks and
serving_input_receiver_fn, ported mechanically, on real TensorFlow and tiny data."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import array_input_fn, collector_off, make_data
from tpuestimator.errors import ModelFnError

X, Y = make_data(300, 8, 3)


def _model_fn(metrics_fn=None, report_fn=None, learning_rate=0.05):
    def model_fn(params):
        import keras

        from tpuestimator import ModelSpec

        inputs = keras.Input((8,), name="x")
        model = keras.Model(inputs, keras.layers.Dense(3)(inputs))
        optimizer = keras.optimizers.SGD(learning_rate)
        return ModelSpec(model=model, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None),
                         optimizer=optimizer, metrics=metrics_fn(model) if metrics_fn else {},
                         report=report_fn(optimizer) if report_fn else {})
    return model_fn


def _estimator(tmp_path, model_fn, **config):
    from tpuestimator import Estimator, RunConfig

    settings = dict(model_dir=str(tmp_path / "model"), train_batch_size=32, eval_batch_size=64, predict_batch_size=64,
                    iterations_per_loop=10, strategy="cpu")
    settings.update(config)
    return Estimator(model_fn, RunConfig(**settings), {})


def mnist_style_metric_fn(labels, logits):
    """TPUEstimator's MNIST metric_fn with `tf.metrics` -> `porting.metrics`, plus a per-example
    tensor and a weighted mean."""
    import tensorflow as tf

    from tpuestimator.porting import metrics

    predictions = tf.argmax(logits, axis=1)
    correct = tf.cast(tf.equal(tf.cast(labels, tf.int64), predictions), tf.float32)
    return {"accuracy": metrics.accuracy(labels=labels, predictions=predictions),
            "correct": correct,
            "class0_accuracy": metrics.mean(correct, weights=tf.cast(tf.equal(labels, 0), tf.float32))}


@pytest.mark.parametrize("strategy", ["cpu", "mirrored"])   # mirrored: 8 replicas, a padded last batch
def test_eval_metrics_streams_tf1_metrics_over_every_example(tmp_path, strategy):
    from tpuestimator.porting import eval_metrics

    est = _estimator(tmp_path, _model_fn(lambda model: eval_metrics(mnist_style_metric_fn, ["labels", "logits"],
                                                                    outputs=model.output)), strategy=strategy)
    est.train(array_input_fn(X, Y), max_steps=30)
    result = est.evaluate(array_input_fn(X, Y))
    predicted = np.array([p["outputs"].argmax() for p in est.predict(array_input_fn(X, Y))])
    assert result["num_examples"] == len(Y)
    expected = float(np.mean(predicted == Y))
    assert result["accuracy"] == pytest.approx(expected, abs=1e-6)
    assert result["correct"] == pytest.approx(expected, abs=1e-6)
    assert result["class0_accuracy"] == pytest.approx(float(np.mean(predicted[Y == 0] == 0)), abs=1e-6)


@pytest.mark.quick("porting")
def test_eval_metrics_refuses_what_cannot_stream():
    import keras
    import tensorflow as tf

    from tpuestimator.porting import eval_metrics

    def tf1_pair(labels, logits):
        return {"accuracy": (tf.constant(0.0), tf.no_op())}

    with pytest.raises(ModelFnError, match=r"\(value, update_op\).*porting.metrics"):
        eval_metrics(tf1_pair)

    def keras_instance(labels, logits):
        return {"auc": keras.metrics.AUC()}

    with pytest.raises(ModelFnError, match=r"porting.metrics.keras\(AUC"):
        eval_metrics(keras_instance)
    with pytest.raises(ModelFnError, match="'labels' or 'outputs'"):
        eval_metrics(mnist_style_metric_fn, [tf.constant(1), "logits"])


def test_host_call_writes_every_step_with_the_learning_rate_schedule(tmp_path):
    import keras
    import tensorflow as tf

    from tpuestimator.porting import HostCall

    calls = []

    def host_call_fn(gs, loss, lr):           # TPUEstimator's shape: [1]-shaped tensors, gs[0]
        gs = gs[0]
        calls.append((int(gs), float(loss[0]), float(lr[0])))
        tf.summary.scalar("loss", loss[0])     # the default writer, at step gs
        tf.summary.scalar("learning_rate", lr[0])

    schedule = keras.optimizers.schedules.ExponentialDecay(0.05, decay_steps=4, decay_rate=0.5)
    host_call = HostCall(host_call_fn, ["global_step", "loss", "learning_rate"], logdir=str(tmp_path / "summaries"))
    est = _estimator(tmp_path, _model_fn(report_fn=host_call.report, learning_rate=schedule))
    est.train(array_input_fn(X, Y), max_steps=20, hooks=[host_call])
    host_call.close()

    assert [c[0] for c in calls] == list(range(1, 21))
    for step, loss, lr in calls:
        assert lr == pytest.approx(float(schedule(step - 1)), rel=1e-5)   # the rate the step trained with
        assert np.isfinite(loss)
    assert calls[0][1] > calls[-1][1]
    steps_written = []
    for path in tf.io.gfile.glob(str(tmp_path / "summaries" / "*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            steps_written += [event.step for v in event.summary.value if v.tag == "loss"]
    assert sorted(steps_written) == list(range(1, 21))


def test_a_host_call_keeps_no_estimator_alive(tmp_path):
    """The model function keeps the HostCall (its `report`) and the HostCall is the Estimator's
    hook: the hook holds the Estimator weakly, so a dropped Estimator (and its input iterator)
    is freed at once, not by a garbage collection (core.workarounds says why that can stall).
    The collector is off from the start, so a cycle made while training stays and is seen."""
    import weakref

    from tpuestimator.porting import HostCall

    calls = []
    with collector_off():
        host_call = HostCall(lambda gs, loss: calls.append(int(gs[0])), ["global_step", "loss"])
        est = _estimator(tmp_path, _model_fn(report_fn=host_call.report))
        est.train(array_input_fn(X, Y), max_steps=10, hooks=[host_call])
        assert host_call.estimator is est and calls == list(range(1, 11))
        ref = weakref.ref(est)
        del est
        assert ref() is None, "the Estimator is kept alive by a reference cycle through its HostCall"
        assert host_call.estimator is None


def test_host_call_needs_the_optimizer_for_the_learning_rate():
    from tpuestimator.porting import HostCall

    host_call = HostCall(lambda gs, lr: None, ["global_step", "learning_rate"])
    with pytest.raises(ModelFnError, match=r"report\(optimizer\)"):
        host_call.report()


class RecordingHook:
    """A TF1 SessionRunHook, written against tf.compat.v1.train.SessionRunHook's methods."""

    def __init__(self, stop_at):
        self.events, self.stop_at = [], stop_at

    def begin(self):
        self.events.append("begin")

    def after_create_session(self, session, coord):
        self.events.append(("after_create_session", session, coord))

    def before_run(self, run_context):
        import tensorflow as tf

        self.events.append("before_run")
        return tf.compat.v1.train.SessionRunArgs({"step": "global_step", "loss": "loss"})

    def after_run(self, run_context, run_values):
        self.events.append(("after_run", run_values.results["step"], run_values.results["loss"]))
        if run_values.results["step"] >= self.stop_at:
            run_context.request_stop()

    def end(self, session):
        self.events.append(("end", session))


def test_session_run_hook_runs_at_loop_boundaries_and_stops(tmp_path):
    import tensorflow as tf

    from tpuestimator.porting import as_loop_hook

    class TF1Hook(RecordingHook, tf.compat.v1.train.SessionRunHook):
        pass

    hook = TF1Hook(stop_at=20)
    est = _estimator(tmp_path, _model_fn())
    est.train(array_input_fn(X, Y), max_steps=50, hooks=[as_loop_hook(hook)])
    assert est.global_step == 20                      # request_stop ended training after that loop
    assert hook.events[:3] == ["begin", ("after_create_session", None, None), "before_run"]
    runs = [e for e in hook.events if isinstance(e, tuple) and e[0] == "after_run"]
    assert [r[1] for r in runs] == [10, 20]           # once per iterations_per_loop steps
    assert all(np.isfinite(r[2]) for r in runs)
    assert hook.events[-1] == ("end", None)


def test_session_run_hook_fetching_a_tensor_names_the_fix(tmp_path):
    import tensorflow as tf

    from tpuestimator.porting import SessionRunArgs, SessionRunHook, as_loop_hook

    class FetchesTensor(SessionRunHook):
        def before_run(self, run_context):
            return SessionRunArgs(tf.constant(1))

    est = _estimator(tmp_path, _model_fn())
    with pytest.raises(ValueError, match="cannot be fetched.*'global_step'"):
        est.train(array_input_fn(X, Y), max_steps=10, hooks=[as_loop_hook(FetchesTensor())])


def tf1_serving_input_fn():
    """A TF1 receiver function, with tf.placeholder -> porting.placeholder and the receiver class."""
    import tensorflow as tf

    from tpuestimator.porting import ServingInputReceiver, placeholder

    csv_rows = placeholder(tf.string, shape=[None], name="csv")
    values = tf.strings.to_number(tf.strings.split(csv_rows, ",").to_tensor(shape=[None, 8]))
    return ServingInputReceiver({"x": values}, {"csv": csv_rows})


def test_serving_input_receiver_fns_export_as_signatures(tmp_path):
    import tensorflow as tf

    from tpuestimator.porting import build_parsing_serving_input_receiver_fn, serving_input
    from tpuestimator.serving import open_export

    est = _estimator(tmp_path, _model_fn())
    est.train(array_input_fn(X, Y), max_steps=10)
    parsing = build_parsing_serving_input_receiver_fn({"x": tf.io.FixedLenFeature([8], tf.float32)})
    export = est.export_saved_model(str(tmp_path / "export"), serving_inputs={
        "serving_default": serving_input(parsing), "csv": serving_input(tf1_serving_input_fn)})
    expected = np.stack([p["outputs"] for p in est.predict(array_input_fn(X[:5], Y[:5]))])

    loaded = open_export(export)
    assert {"serving_default", "csv", "features"} <= set(loaded.signature_names)
    rows = [",".join(str(float(v)) for v in row) for row in X[:5]]
    np.testing.assert_allclose(loaded.run("csv", {"csv": np.array(rows, dtype=object)})["outputs"], expected,
                               rtol=1e-5, atol=1e-5)
    records = [tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=row))})).SerializeToString() for row in X[:5]]
    np.testing.assert_allclose(loaded.run("serving_default", {"examples": np.array(records, dtype=object)})["outputs"],
                               expected, rtol=1e-5, atol=1e-5)


def test_serving_input_refuses_a_receiver_tensor_that_is_no_placeholder():
    import tensorflow as tf

    from tpuestimator.porting import ServingInputReceiver, placeholder, serving_input

    def receiver_fn():
        raw = placeholder(tf.float32, [None, 8], name="raw")
        return ServingInputReceiver({"x": raw}, {"raw": raw * 2.0})

    with pytest.raises(ModelFnError, match="'raw' is not a porting.placeholder"):
        serving_input(receiver_fn)
