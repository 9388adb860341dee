"""The Estimator's contract: exact eval, replicas, steps vs max_steps, resume, predict, export."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import array_input_fn, collector_off, finite_input_fn, make_data


def _estimator(tmp_path, strategy="cpu", params=None, **kw):
    from tpuestimator import Estimator, RunConfig

    cfg = dict(model_dir=str(tmp_path / "model"), train_batch_size=64, eval_batch_size=64, predict_batch_size=64,
               iterations_per_loop=10, save_checkpoints_steps=20, strategy=strategy)
    cfg.update(kw)
    return Estimator("linear", RunConfig(**cfg), {"num_classes": 3, "learning_rate": 0.05,
                                                  "vocabulary": ["a", "b", "c"], **(params or {})})


def _numpy_reference(est, x, y):
    """Loss and accuracy computed with numpy from the model's weights, over every example."""
    kernel, bias = [np.asarray(v) for v in est.model.get_layer("logits").weights]
    logits = x @ kernel + bias
    logits = logits - logits.max(1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    return float(-logp[np.arange(len(y)), y].mean()), float((logits.argmax(1) == y).mean())


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory):
    """A linear model trained 30 steps on 8 replicas over 1001 examples (which no global batch
    of 64 divides), and its data: trained once for the tests that only read it back."""
    x, y = make_data(1001)
    est = _estimator(tmp_path_factory.mktemp("mirrored"), strategy="mirrored")
    est.train(array_input_fn(x, y), max_steps=30)
    return est, x, y


def test_exact_eval_on_8_replicas_covers_every_example(mirrored):
    est, x, y = mirrored
    assert est.num_replicas == 8 and est.global_step == 30
    metrics = est.evaluate(array_input_fn(x, y))
    assert metrics["num_examples"] == 1001
    loss, acc = _numpy_reference(est, x, y)
    assert metrics["loss"] == pytest.approx(loss, rel=1e-5, abs=1e-6)
    assert metrics["accuracy"] == pytest.approx(acc, abs=1e-6)


def test_eval_steps_limits_batches(tmp_path):
    x, y = make_data(1001)
    est = _estimator(tmp_path)
    est.train(array_input_fn(x, y), max_steps=10)
    assert est.evaluate(array_input_fn(x, y), steps=3)["num_examples"] == 3 * 64


def test_loss_curves_agree_on_1_and_8_replicas(tmp_path):
    x, y = make_data(1024)
    curves = []
    for strategy in ("cpu", "mirrored"):
        # SGD: Adam's steps do not change when every gradient is scaled, so with Adam a loss
        # averaged per replica (gradients 8x too large after the sum) trained the same curve
        est = _estimator(tmp_path / strategy, strategy=strategy, iterations_per_loop=5, params={"optimizer": "sgd"})
        losses = []
        est.train(array_input_fn(x, y), max_steps=40,
                  hooks=[lambda event, info, losses=losses: losses.append(info["loss"]) if event == "after_loop" else None])
        curves.append(losses)
    assert len(curves[0]) == len(curves[1]) == 8
    np.testing.assert_allclose(curves[0], curves[1], rtol=1e-4, atol=1e-5)


def test_steps_are_incremental_and_max_steps_absolute(tmp_path):
    x, y = make_data(256)
    est = _estimator(tmp_path)
    fn = array_input_fn(x, y)
    est.train(fn, steps=10)
    est.train(fn, steps=10)
    assert est.global_step == 20          # two train(steps=10) calls train 20 steps
    est.train(fn, max_steps=30)
    assert est.global_step == 30
    est.train(fn, max_steps=30)           # already there: trains nothing
    assert est.global_step == 30
    with pytest.raises(ValueError, match="both steps and max_steps"):
        est.train(fn, steps=1, max_steps=40)


def test_training_stops_when_finite_input_ends(tmp_path):
    x, y = make_data(64 * 7)
    est = _estimator(tmp_path)
    est.train(finite_input_fn(x, y), steps=100)  # seed 003: only as many steps as there are batches
    assert est.global_step == 7


def test_resume_continues_from_last_checkpoint(tmp_path):
    x, y = make_data(256)
    fn = array_input_fn(x, y)
    first = _estimator(tmp_path, save_checkpoints_steps=20)
    first.train(fn, max_steps=20)
    assert first.latest_checkpoint().endswith("ckpt-20")
    seen = []
    second = _estimator(tmp_path, save_checkpoints_steps=20)  # a new process would look the same
    second.train(fn, max_steps=50, hooks=[lambda e, info: seen.append(info["step"]) if e == "begin" else None])
    assert seen == [20]                   # did not retrain steps before the checkpoint
    assert second.global_step == 50
    assert second.latest_checkpoint().endswith("ckpt-50")


def test_predict_yields_one_dict_per_example_with_class_strings(mirrored):
    est, x, y = mirrored
    preds = list(est.predict(array_input_fn(x, y)))
    assert len(preds) == 1001
    assert set(preds[0]) == {"probabilities", "class_id", "class"}
    assert all(p["class"] == "abc"[p["class_id"]] for p in preds[:50])
    acc = np.mean([p["class_id"] == t for p, t in zip(preds, y)])
    assert acc == pytest.approx(est.evaluate(array_input_fn(x, y))["accuracy"], abs=1e-6)


def test_export_is_atomic_versioned_and_serves(tmp_path):
    import tensorflow as tf

    x, y = make_data(200)
    est = _estimator(tmp_path)
    est.train(array_input_fn(x, y), max_steps=10)
    path = est.export_saved_model(str(tmp_path / "export"), version=10)
    assert path.endswith("/10")
    again = est.export_saved_model(str(tmp_path / "export"), version=10)
    assert again.endswith("/11")          # never overwrites an export
    leftovers = [p.name for p in (tmp_path / "export").iterdir() if p.name.startswith(".")]
    assert leftovers == []
    serve = tf.saved_model.load(path).signatures["serving_default"]
    out = serve(x=tf.constant(x[:5]))
    expected = [p for _, p in zip(range(5), est.predict(array_input_fn(x[:5], y[:5])))]
    np.testing.assert_allclose(out["probabilities"].numpy(), np.stack([p["probabilities"] for p in expected]),
                               atol=1e-5)
    assert [c.decode() for c in out["class"].numpy()] == [p["class"] for p in expected]


def test_batch_must_divide_by_replicas(tmp_path):
    from tpuestimator.errors import ConfigError

    x, y = make_data(100)
    est = _estimator(tmp_path, strategy="mirrored", train_batch_size=60)
    with pytest.raises(ConfigError, match=r"train.batch_size.*multiple of the replica count \(8"):
        est.train(array_input_fn(x, y), steps=1)


def test_warm_start_copies_weights_not_step(tmp_path):
    x, y = make_data(256)
    src = _estimator(tmp_path / "a")
    src.train(array_input_fn(x, y), max_steps=20)
    dst = _estimator(tmp_path / "b", warm_start_from=str(tmp_path / "a" / "model"))
    dst.train(array_input_fn(x, y), steps=1)
    assert dst.global_step == 1
    # After one more step from the same weights the models are close, not re-initialised.
    a = np.asarray(src.model.get_layer("logits").weights[0])
    b = np.asarray(dst.model.get_layer("logits").weights[0])
    assert np.abs(a - b).max() < 0.2


def test_hook_stops_training_by_flag(tmp_path):
    from tpuestimator.hooks import Hook

    class StopAt30(Hook):
        def after_loop(self, step, logs):
            self.stop_training = step >= 30

    x, y = make_data(256)
    est = _estimator(tmp_path)
    est.train(array_input_fn(x, y), max_steps=100, hooks=[StopAt30()])
    assert est.global_step == 30


def test_nan_sentinel_stops_without_writing_a_nonfinite_checkpoint(tmp_path):
    import tensorflow as tf

    from tpuestimator import Estimator, RunConfig
    from tpuestimator.errors import NonFiniteError

    x, y = make_data(256)
    est = Estimator("linear", RunConfig(model_dir=str(tmp_path / "m"), train_batch_size=64, iterations_per_loop=10,
                                        save_checkpoints_steps=10, strategy="cpu"),
                    {"num_classes": 3, "learning_rate": 1e10, "optimizer": "sgd"})
    with pytest.raises(NonFiniteError) as info:
        est.train(array_input_fn(x * 1e20, y), max_steps=100)
    assert info.value.step <= 20
    latest = est.latest_checkpoint()
    if latest:  # whatever was saved before the blow-up is finite
        reader = tf.train.load_checkpoint(latest)
        for name in reader.get_variable_to_shape_map():
            value = reader.get_tensor(name)
            if hasattr(value, "dtype") and np.issubdtype(np.asarray(value).dtype, np.floating):
                assert np.isfinite(value).all(), name


@pytest.mark.parametrize("options", [{"precision": "mixed_bfloat16"}, {"jit_compile": True}])
def test_precision_and_xla_train_and_evaluate(tmp_path, options):
    x, y = make_data(512)
    est = _estimator(tmp_path, **options)
    est.train(array_input_fn(x, y), max_steps=40)
    metrics = est.evaluate(array_input_fn(x, y))
    assert metrics["num_examples"] == 512
    assert np.isfinite(metrics["loss"]) and metrics["accuracy"] > 0.6
    if "precision" in options:
        policies = {layer.dtype_policy.name for layer in est.model.layers}
        assert "mixed_bfloat16" in policies                      # the policy reached the model
        assert est.model.get_layer("logits").dtype_policy.name == "float32"   # logits stay float32
        assert {layer.compute_dtype for layer in est.model.layers if layer.dtype_policy.name == "mixed_bfloat16"} \
            == {"bfloat16"}                                       # computed in bfloat16 ...
        assert {str(w.dtype) for w in est.model.weights} == {"float32"}   # ... with float32 variables


def test_tpu_strategy_without_a_tpu_fails_fast_with_the_fix(tmp_path):
    import socket
    import time

    from tpuestimator.core.devices import make_strategy
    from tpuestimator.core.run_config import RunConfig
    from tpuestimator.errors import TPUUnavailableError

    with socket.socket() as s:          # a loopback port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(TPUUnavailableError, match=r"No TPU is reachable.*grpc://127.0.0.1.*run.strategy: auto"):
        make_strategy(RunConfig(model_dir=str(tmp_path), strategy="tpu", tpu=f"grpc://127.0.0.1:{port}"))
    with pytest.raises(TPUUnavailableError, match="no local TPU devices"):
        make_strategy(RunConfig(model_dir=str(tmp_path), strategy="tpu", tpu="local"))
    assert time.monotonic() - start < 30


def test_async_checkpoints_save_repeatedly_and_restore(tmp_path):
    x, y = make_data(256)
    est = _estimator(tmp_path, async_checkpoint=True, save_checkpoints_steps=10, keep_checkpoint_max=2)
    est.train(array_input_fn(x, y), max_steps=40)       # four async saves (the 2nd used to fail)
    assert est.latest_checkpoint().endswith("ckpt-40")
    kept = sorted(p.name for p in (tmp_path / "model").glob("ckpt-*.index"))
    assert kept == ["ckpt-30.index", "ckpt-40.index"]
    again = _estimator(tmp_path, async_checkpoint=True)
    again.train(array_input_fn(x, y), max_steps=40)      # restores; nothing left to train
    assert again.global_step == 40
    np.testing.assert_allclose(np.asarray(again.model.get_layer("logits").weights[0]),
                               np.asarray(est.model.get_layer("logits").weights[0]))


def test_a_dropped_estimator_is_freed_at_once_without_the_garbage_collector(tmp_path):
    """The trainer and evaluator hold no reference back to the Estimator: dropping it frees its
    iterators by reference counting, not at some later collection (a mirrored iterator freed
    late can stall: core.workarounds)."""
    import weakref

    x, y = make_data(256)
    est = _estimator(tmp_path)
    est.train(array_input_fn(x, y), max_steps=10)
    est.evaluate(array_input_fn(x, y))
    list(est.predict(array_input_fn(x, y)))
    with collector_off():
        ref = weakref.ref(est)
        del est
        assert ref() is None, "the Estimator is kept alive by a reference cycle"


def test_an_estimator_trained_with_a_watch_hook_is_freed_at_once(tmp_path):
    """A hook given to `train` holds the Estimator weakly: a `WatchHook`, whose function for the
    watched values is a closure over the hook (a reference cycle), keeps no Estimator alive, and
    a dropped Estimator and its input iterator are freed at once. The garbage collector is off
    from the start, so a cycle made while training stays and is seen."""
    import weakref

    from tpuestimator.hooks import WatchHook

    x, y = make_data(256)
    watched = []
    with collector_off():
        est = _estimator(tmp_path)
        hook = WatchHook(["outputs"], log=watched.append)
        est.train(array_input_fn(x, y), max_steps=10, hooks=[hook])
        assert hook.estimator is est and len(watched) == 1  # the hook ran (one loop)
        ref = weakref.ref(est)
        del est
        assert ref() is None, "the Estimator is kept alive by a reference cycle through its hook"
        assert hook.estimator is None


def test_a_hook_holds_a_stand_in_without_weak_references_itself():
    """`Hook.estimator` holds an Estimator weakly; an object that takes no weak reference (a
    stand-in in a user's own test) is held as it is, and None clears it."""
    import types

    from tpuestimator.hooks import Hook

    hook = Hook()
    assert hook.estimator is None
    hook.estimator = types.SimpleNamespace(model_dir="m")  # SimpleNamespace takes no weak reference
    assert hook.estimator.model_dir == "m"
    hook.estimator = None
    assert hook.estimator is None


def test_a_reusable_input_is_built_once_and_a_plain_function_called_at_every_evaluation(mirrored):
    """An input function declaring `reusable` (the built-in pipeline's evaluation input) is called
    once for evaluations with the same params, and each evaluation still covers every example
    exactly once (8 replicas, padded); a plain function is called at every evaluation, so one
    that reads other data each time is honoured."""
    from tpuestimator.core.input_fn import InputFn

    est, x, y = mirrored
    calls = []

    def counted(params):
        calls.append(params["mode"])
        return array_input_fn(x, y)(params)

    reusable = InputFn(fn=counted, reusable=True)
    first, second = est.evaluate(reusable), est.evaluate(reusable)
    assert calls == ["eval"]
    assert first == second and first["num_examples"] == 1001
    assert first["loss"] == pytest.approx(_numpy_reference(est, x, y)[0], rel=1e-5, abs=1e-6)
    assert est.evaluate(reusable, steps=2)["num_examples"] == 2 * 64 and calls == ["eval", "eval"]  # other steps

    sizes = iter([1001, 500])

    def changing(params):  # a plain function: the first call reads every example, the second 500
        n = next(sizes)
        return array_input_fn(x[:n], y[:n])(params)

    assert [est.evaluate(changing)["num_examples"] for _ in range(2)] == [1001, 500]


def test_a_seeded_input_trains_on_the_dataset_the_model_was_built_from(tmp_path, fixtures_dir):
    """An input declaring `seeded` (the built-in training pipeline, not under `data.service`) is
    called once by a fresh training on one host replica: the model is built from the dataset it
    then trains on. A plain function is called twice (the model's probe, the training) and trains
    the same steps; a resumed training calls the seeded one again, positioned at its step, and
    ends where an uninterrupted training does."""
    from tpuestimator.core.input_fn import InputFn
    from tpuestimator.data import make_input_fn

    x, y = make_data(256)
    calls = {"seeded": [], "plain": []}

    def counted(kind):
        def input_fn(params):
            calls[kind].append(params["start_step"])
            return array_input_fn(x, y, shuffle=True)(params)
        return input_fn

    seeded = InputFn(fn=counted("seeded"), seeded=True)
    est = _estimator(tmp_path / "seeded")
    est.train(seeded, max_steps=20)
    assert calls["seeded"] == [0]
    plain = _estimator(tmp_path / "plain")
    plain.train(counted("plain"), max_steps=40)
    assert calls["plain"] == [0, 0]
    resumed = _estimator(tmp_path / "seeded")       # a new process's Estimator on the same model dir
    resumed.train(seeded, max_steps=40)
    assert calls["seeded"] == [0, 0, 20] and resumed.global_step == 40
    for got, want in zip(resumed.model.get_weights(), plain.model.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert _numpy_reference(resumed, x, y)[1] > 0.8    # it learned (3 linearly separable classes)

    data = {"manifest": str(fixtures_dir / "parity" / "manifest.json")}
    assert make_input_fn(data, "train").seeded and not make_input_fn(data, "eval").seeded
    assert not make_input_fn({**data, "service": "grpc://localhost:5000"}, "train").seeded


def test_an_input_that_fits_in_memory_is_read_once_for_whole_evaluations(mirrored):
    """An input declaring `fits_in_memory` (the built-in pipeline's small evaluation input) is
    read from its source by the first evaluation only; each evaluation still covers every example
    once (8 replicas, padded) with numpy's loss. An evaluation of some `steps` (a partly read
    cache would be dropped) and an input without the declaration read the source every time."""
    import tensorflow as tf

    from tpuestimator.core.input_fn import InputFn

    est, x, y = mirrored
    reads = []

    def examples():   # the "files": a Python generator, so each read of the source is counted
        reads.append(1)
        yield from zip(x, y)

    def from_source(params):
        ds = tf.data.Dataset.from_generator(examples, output_signature=(
            tf.TensorSpec([x.shape[1]], tf.float32), tf.TensorSpec([], tf.int64)))
        return ds.map(lambda xi, yi: ({"x": xi}, yi)).batch(params["batch_size"])

    kept = InputFn(fn=from_source, reusable=True, fits_in_memory=True)
    results = [est.evaluate(kept) for _ in range(3)]
    assert len(reads) == 1
    assert results[0] == results[1] == results[2] and results[0]["num_examples"] == 1001
    assert results[0]["loss"] == pytest.approx(_numpy_reference(est, x, y)[0], rel=1e-5, abs=1e-6)
    assert est.evaluate(kept, steps=2)["num_examples"] == 2 * 64 and len(reads) == 2
    assert est.evaluate(kept, steps=2)["num_examples"] == 2 * 64 and len(reads) == 3
    reread = InputFn(fn=from_source, reusable=True)
    assert [est.evaluate(reread)["loss"] for _ in range(2)] == [results[0]["loss"]] * 2 and len(reads) == 5
