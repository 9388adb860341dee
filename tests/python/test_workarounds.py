"""The TensorFlow work-arounds are in force where the bug would bite, and change no results."""
from __future__ import annotations

import traceback

import numpy as np
import pytest


def _per_device_iterators(strategy, dataset_fn):
    import tensorflow as tf

    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
    first = strategy.experimental_local_results(next(iterator))
    # TensorFlow's own objects, read to check the work-around reached them: if these names
    # change, the patched function has most likely changed too.
    devices = iterator._iterators[0]._iterator._device_iterators
    assert all(isinstance(d, tf.data.Iterator) for d in devices)
    return devices, first


def test_mirrored_input_per_device_datasets_do_not_autotune():
    import tensorflow as tf

    from tpuestimator.core.workarounds import fast_multi_device_iterator_teardown

    assert fast_multi_device_iterator_teardown()
    assert fast_multi_device_iterator_teardown()            # a second call changes nothing
    devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    strategy = tf.distribute.MirroredStrategy(devices)

    def dataset_fn(ctx):
        return tf.data.Dataset.range(64).batch(ctx.get_per_replica_batch_size(16)).repeat()

    device_iterators, first = _per_device_iterators(strategy, dataset_fn)
    assert len(device_iterators) == len(devices) == 8
    assert all(d._dataset.options().autotune.enabled is False for d in device_iterators)
    # Same values as before the work-around: replica i gets the i-th slice of the global batch.
    np.testing.assert_array_equal(np.concatenate([t.numpy() for t in first]), np.arange(16))


def test_building_a_strategy_puts_the_work_around_in_place(python_env, forked_python):
    # In a process of its own: in this one an earlier test may have applied it already
    # (forked_python: TensorFlow imported, nothing of tpuestimator's; conftest.py).
    import subprocess

    code = ("from tensorflow.python.data.ops import multi_device_iterator_ops as mdi\n"
            "from tpuestimator.core.devices import make_strategy\n"
            "from tpuestimator.core.run_config import RunConfig\n"
            "assert not hasattr(mdi._create_device_dataset, '__wrapped__')\n"
            "make_strategy(RunConfig(model_dir='unused', strategy='mirrored'))\n"
            "assert hasattr(mdi._create_device_dataset, '__wrapped__')\n")
    proc = subprocess.run([forked_python, "-c", code], env=python_env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def _optimizers_and_counters():
    """A built Adam, and a built LossScaleOptimizer around another, with their integer counters."""
    import keras

    weights = keras.Variable(np.ones(3, "float32"))
    adam = keras.optimizers.Adam(0.1)
    scaled = keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam(0.1))
    for optimizer in (adam, scaled):
        optimizer.build([weights])
    return weights, adam, scaled


def _op_types(fn) -> set:
    import tensorflow as tf

    return {op.type for op in tf.function(fn).get_concrete_function().graph.get_operations()}


def _calling(method, value):
    """`method(value)` as a function of no arguments (for tracing)."""
    return lambda: method(value)


def test_optimizer_step_counters_add_in_one_op_of_the_tf_variable():
    """Keras's `iterations.assign_add(1)` is a read, an addition and a write (three ops: two
    parameter-server workers can interleave them and lose a step); after
    `atomic_optimizer_counters` it is the `tf.Variable`'s own `AssignAddVariableOp`."""
    from tpuestimator.core.workarounds import atomic_optimizer_counters

    _, adam, scaled = _optimizers_and_counters()
    assert {"AssignVariableOp", "AddV2"} <= _op_types(_calling(adam.iterations.assign_add, 1))  # Keras's own
    assert [v.path for v in atomic_optimizer_counters(adam)] == [adam.iterations.path]
    assert [v.path for v in atomic_optimizer_counters(adam)] == [adam.iterations.path]  # a second call: the same
    counters = atomic_optimizer_counters(scaled)
    # the wrapped optimizer's counter (the one `iterations` reads), the loss scale's growth
    # counter, and the wrapper's own (unused) counter
    assert {v.path for v in counters} == {scaled.iterations.path, scaled.step_counter.path,
                                          f"{scaled.name}/iteration"}
    for counter in [adam.iterations, *counters]:
        # the variable is read only after the update (the returned value): no read-add-write
        added, subtracted = _op_types(_calling(counter.assign_add, 1)), _op_types(_calling(counter.assign_sub, 1))
        assert "AssignAddVariableOp" in added and not added & {"AssignVariableOp", "AddV2"}, added
        assert "AssignSubVariableOp" in subtracted and not subtracted & {"AssignVariableOp", "Sub"}, subtracted
    before = int(adam.iterations.numpy())
    adam.iterations.assign_add(2)
    adam.iterations.assign_sub(1)
    assert int(adam.iterations.numpy()) == before + 1


def test_checkpoints_of_optimizers_with_and_without_atomic_counters_restore_into_each_other(tmp_path):
    import keras
    import tensorflow as tf

    from tpuestimator.core.workarounds import atomic_optimizer_counters

    def train(optimizer, weights, steps):
        for _ in range(steps):
            optimizer.apply_gradients([(tf.constant([0.5, -1.0, 2.0]), weights)])

    def fresh(atomic: bool):
        weights = keras.Variable(np.ones(3, "float32"))
        optimizer = keras.optimizers.Adam(0.1)
        optimizer.build([weights])
        if atomic:
            atomic_optimizer_counters(optimizer)
        return weights, optimizer

    # written as before the work-around, restored with it, and the other way round
    for written_atomic, path in ((False, tmp_path / "before"), (True, tmp_path / "after")):
        weights, optimizer = fresh(written_atomic)
        train(optimizer, weights, 3)
        saved = tf.train.Checkpoint(weights=weights, optimizer=optimizer).write(str(path))
        weights2, optimizer2 = fresh(not written_atomic)
        tf.train.Checkpoint(weights=weights2, optimizer=optimizer2).read(saved).assert_consumed()
        assert int(optimizer2.iterations.numpy()) == 3
        np.testing.assert_array_equal(weights2.numpy(), weights.numpy())
        for a, b in zip(optimizer.variables, optimizer2.variables):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        train(optimizer2, weights2, 2)
        assert int(optimizer2.iterations.numpy()) == 5


def test_a_learning_rate_schedule_sees_the_global_step_on_several_replicas_and_after_a_resume(tmp_path):
    """The optimizer counts one step per global step, not one per replica (8 replicas), and a
    resumed training continues its count from the checkpoint."""
    import dataclasses

    import keras

    from helpers import array_input_fn, make_data
    from tpuestimator.core.estimator import Estimator, RunConfig
    from tpuestimator.models.tabular import linear

    def schedule():
        return keras.optimizers.schedules.PolynomialDecay(0.01, decay_steps=1000, end_learning_rate=0.0)

    def linear_on_a_schedule(params):
        return dataclasses.replace(linear(params), optimizer=keras.optimizers.Adam(schedule()))

    x, y = make_data(256, dim=4)
    config = RunConfig(model_dir=str(tmp_path), strategy="mirrored", train_batch_size=16, iterations_per_loop=5)
    for target in (15, 25):  # the second Estimator resumes from the first's checkpoint at 15
        estimator = Estimator(linear_on_a_schedule, config, {"num_classes": 3})
        estimator.train(array_input_fn(x, y), max_steps=target)
        optimizer = estimator.state.optimizer
        assert estimator.global_step == int(optimizer.iterations.numpy()) == target
        assert float(optimizer.learning_rate.numpy()) == float(schedule()(target).numpy())


def test_an_error_in_training_frees_its_input_at_once_and_the_next_train_reads_on_from_the_step(tmp_path):
    """An error from inside the device loop (a failed assertion in the input, on its 6th batch)
    leaves train(): the error, still held (as a notebook or R keeps the last error), holds no
    iterator, and the same Estimator's next train() builds its input anew from the global step
    (the input function's `start_step`), as a resumed run does."""
    import weakref

    import tensorflow as tf

    from tpuestimator import Estimator, RunConfig
    from tpuestimator.errors import ConfigError
    from tpuestimator.hooks import WatchHook

    poisoned, start_steps, refs = [True], [], []

    def input_fn(params):  # batch k: 8 rows of k, label k % 3; batch 5 fails while `poisoned`
        start_steps.append(params["start_step"])
        check = poisoned[0]

        def batch(k):
            ok = tf.debugging.assert_less(k, tf.constant(5, tf.int64), message="poisoned batch") if check else tf.no_op()
            with tf.control_dependencies([ok]):
                x = tf.fill([8, 4], tf.cast(k, tf.float32) / 10.0)
            return {"x": x}, tf.fill([8], k % 3)

        return tf.data.Dataset.range(1000).map(batch).prefetch(tf.data.AUTOTUNE)

    def keep_a_weak_reference(event, info):
        if event == "begin":
            refs.append(weakref.ref(estimator.train_input.iterator))

    estimator = Estimator("linear", RunConfig(model_dir=str(tmp_path), train_batch_size=8, iterations_per_loop=1,
                                              save_checkpoints_steps=100, strategy="cpu"), {"num_classes": 3})
    with pytest.raises(tf.errors.InvalidArgumentError, match="poisoned batch") as info:
        estimator.train(input_fn, max_steps=8, hooks=[keep_a_weak_reference])
    assert refs[0]() is None, "the failed input's iterator lives as long as the error"
    assert estimator.train_input is None
    # a post-mortem debugger still sees the product's frames: only TensorFlow's lost their locals
    frames = {frame.f_code.co_name: frame.f_locals for frame, _ in traceback.walk_tb(info.value.__traceback__)}
    assert frames["train_to"]["target"] == 8 and frames["run_loop"]["n"] == 1
    assert estimator.global_step == 5  # batches 0-4 trained, one loop each
    poisoned[0] = False
    estimator.train(input_fn, max_steps=8)
    assert set(start_steps[:-1]) == {0} and start_steps[-1] == 5 and estimator.global_step == 8
    # a hook's error (here in its `begin`) drops the input too
    kept = weakref.ref(estimator.train_input.iterator)
    with pytest.raises(ConfigError, match="debug.watch.outputs"):
        estimator.train(input_fn, max_steps=9, hooks=[WatchHook(["nope"])])
    assert kept() is None and estimator.global_step == 8


STAND_IN = '''
def fails(payload):  # a TensorFlow function holding an input, raising from inside
    raise ValueError("from inside TensorFlow")


def keeps_an_error(saved, closed):  # a TensorFlow generator that keeps an error from its own frame
    try:
        try:
            raise KeyError("kept")
        except KeyError as exc:
            saved.append(exc)
        yield 1
    finally:
        closed.append(True)
'''


@pytest.mark.quick("core")
def test_only_finished_tensorflow_frames_lose_their_locals():
    """`drop_tensorflow_frame_locals`: a frame of a `tensorflow.*` module that finished loses its
    locals (here a payload), the caller's frame keeps them, and a TensorFlow generator that is
    still suspended (its frame in an error it keeps) is left running, not closed."""
    from tpuestimator.core.workarounds import drop_tensorflow_frame_locals

    tensorflow_module = {"__name__": "tensorflow.python.stand_in"}
    exec(compile(STAND_IN, "stand_in.py", "exec"), tensorflow_module)

    def caller(payload):
        tensorflow_module["fails"](payload)

    try:
        caller({"rows": 3})
    except ValueError as exc:
        error = exc
    frames = [frame for frame, _ in traceback.walk_tb(error.__traceback__)]
    assert [f.f_code.co_name for f in frames][-2:] == ["caller", "fails"]
    assert drop_tensorflow_frame_locals(error) == 1
    assert frames[-1].f_locals == {} and frames[-2].f_locals["payload"] == {"rows": 3}

    saved, closed = [], []
    generator = tensorflow_module["keeps_an_error"](saved, closed)
    assert next(generator) == 1
    drop_tensorflow_frame_locals(saved[0])
    assert closed == []  # still suspended: its `finally` has not run
    with pytest.raises(StopIteration):
        next(generator)
    assert closed == [True]
