"""Inner device loops: `iterations_per_loop` steps per device call.

Each loop is one `tf.function` over `tf.range(n)` with `n` passed as a tensor, so changing
the number of steps (the last, shorter loop) never retraces. The host wakes only between
loops; checkpoints, logging, hooks and evaluation live in the Estimator's outer loop.
"""
from __future__ import annotations

from typing import Callable


def make_train_loop(strategy, replica_step: Callable, global_step, *, exhaustible: bool, per_step=None):
    """Returns `loop(iterator, n) -> steps_run` running `replica_step` on every replica n times.

    Args:
      exhaustible: the dataset can end (finite input with no `repeat`): the loop then reads
        with `get_next_as_optional` and stops early when data runs out (seed 003's
        `OutOfRange` semantics). Infinite datasets use the cheaper plain `next`.
      per_step: None (default), or {name: float32 variable of length >= n}: `replica_step`
        then returns {name: scalar} and step i's value, averaged over the replicas, is stored
        at index i at the loop's end (TPUEstimator's `host_call`: the host reads the buffers
        after the loop).
    """
    import tensorflow as tf

    if per_step is not None:
        return _make_recording_loop(strategy, replica_step, global_step, exhaustible=exhaustible, buffers=per_step)
    if exhaustible:
        @tf.function
        def loop(iterator, n):
            steps = tf.constant(0, tf.int64)
            for _ in tf.range(n):
                optional = iterator.get_next_as_optional()
                if not optional.has_value():
                    break
                strategy.run(replica_step, args=optional.get_value())
                steps += 1
            global_step.assign_add(steps)
            return steps
    else:
        @tf.function
        def loop(iterator, n):
            for _ in tf.range(n):
                strategy.run(replica_step, args=next(iterator))
            global_step.assign_add(tf.cast(n, tf.int64))
            return tf.cast(n, tf.int64)
    return loop


def _make_recording_loop(strategy, replica_step: Callable, global_step, *, exhaustible: bool, buffers: dict):
    """The train loop of `make_train_loop(per_step=...)`: each step's values (averaged over the
    replicas) go into TensorArrays inside the loop and into the buffers once at its end."""
    import tensorflow as tf

    mean = tf.distribute.ReduceOp.MEAN
    names = list(buffers)
    capacity = int(next(iter(buffers.values())).shape[0])

    def reduced(values):
        return [tf.cast(strategy.reduce(mean, values[name], axis=None), tf.float32) for name in names]

    def store(arrays):
        for name, array in zip(names, arrays):
            stacked = array.stack()
            buffers[name].assign(tf.pad(stacked, [[0, capacity - tf.shape(stacked)[0]]]))

    def new_arrays():
        return [tf.TensorArray(tf.float32, size=0, dynamic_size=True) for _ in names]

    if exhaustible:
        @tf.function
        def loop(iterator, n):
            steps = tf.constant(0, tf.int64)
            arrays = new_arrays()
            for _ in tf.range(n):
                optional = iterator.get_next_as_optional()
                if not optional.has_value():
                    break
                values = reduced(strategy.run(replica_step, args=optional.get_value()))
                arrays = [a.write(tf.cast(steps, tf.int32), v) for a, v in zip(arrays, values)]
                steps += 1
            store(arrays)
            global_step.assign_add(steps)
            return steps
    else:
        @tf.function
        def loop(iterator, n):
            arrays = new_arrays()
            for i in tf.range(n):
                values = reduced(strategy.run(replica_step, args=next(iterator)))
                arrays = [a.write(tf.cast(i, tf.int32), v) for a, v in zip(arrays, values)]
            store(arrays)
            global_step.assign_add(tf.cast(n, tf.int64))
            return tf.cast(n, tf.int64)
    return loop


def make_eval_loop(strategy, replica_step: Callable):
    """Returns `loop(dist_dataset)` running `replica_step` over every (padded) batch."""
    import tensorflow as tf

    @tf.function
    def loop(dist_dataset):
        for batch in dist_dataset:
            strategy.run(replica_step, args=batch)
    return loop


def make_predict_step(strategy, replica_step: Callable):
    """Returns `step(batch) -> per-replica results` for host-side collection."""
    import tensorflow as tf

    @tf.function
    def step(batch):
        return strategy.run(replica_step, args=batch)
    return step


def make_loop_reader(metrics, finite_variables=None):
    """Returns `read() -> {key: result}` reading every metric and then resetting it, in ONE
    device call (one host round trip per loop instead of one per metric and per reset).

    Args:
      metrics: {key: keras.metrics.Metric}.
      finite_variables: variables for the NaN/Inf sentinel, or None: with them, `read()` also
        returns `"__all_finite__"`, True when every floating variable is finite (computed
        in the same call as `make_all_finite` would).
    """
    import tensorflow as tf

    metrics = dict(metrics)
    check = _finite_checks(finite_variables) if finite_variables is not None else None

    @tf.function
    def read():
        results = {key: tf.identity(metric.result()) for key, metric in metrics.items()}
        with tf.control_dependencies(list(results.values())):
            for metric in metrics.values():
                metric.reset_state()
        if check is not None:
            results["__all_finite__"] = check()
        return results
    return read


def _finite_checks(variables):
    import tensorflow as tf

    def all_finite():
        checks = [tf.reduce_all(tf.math.is_finite(tf.cast(v, tf.float32))) for v in variables
                  if tf.as_dtype(v.dtype).is_floating]
        return tf.reduce_all(tf.stack(checks)) if checks else tf.constant(True)
    return all_finite


def make_all_finite(variables):
    """Returns a function that is True when every variable is finite (NaN/Inf sentinel)."""
    import tensorflow as tf

    @tf.function
    def all_finite():
        checks = [tf.reduce_all(tf.math.is_finite(tf.cast(v, tf.float32))) for v in variables
                  if tf.as_dtype(v.dtype).is_floating]
        return tf.reduce_all(tf.stack(checks)) if checks else tf.constant(True)
    return all_finite
