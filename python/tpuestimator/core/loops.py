"""Inner device loops: `iterations_per_loop` steps per device call.

Each loop is one `tf.function` over `tf.range(n)` with `n` passed as a tensor, so changing
the number of steps (the last, shorter loop) never retraces. The host wakes only between
loops; checkpoints, logging, hooks and evaluation live in the outer loop
(`tpuestimator.core.controller`). Every function here is built with `tracing.device_function`, so
building them again for the next Estimator in the same process does not warn of retracing.
"""
from __future__ import annotations

from collections.abc import Callable

from tpuestimator.core.tracing import device_function
from tpuestimator.system.graph_code import as_written, users_graph_code


def make_train_loop(strategy, replica_step: Callable, global_step, *, exhaustible: bool, per_step=None):
    """Returns `loop(iterator, n) -> steps_run` running `replica_step` on every replica n times.

    One factory for every variant; the two choices are made when the loop is traced:

    Args:
      exhaustible: the dataset can end (finite input with no `repeat`): the loop then reads
        with `get_next_as_optional` and stops early when data runs out (TPUEstimator's
        `OutOfRange` semantics). Infinite datasets use the cheaper plain `next`.
      per_step: None (default), or {name: float32 variable of length >= n}: `replica_step`
        then returns {name: scalar} and step i's value, averaged over the replicas, is stored
        at index i at the loop's end (TPUEstimator's `host_call`: the host reads the buffers
        after the loop). The values go into TensorArrays inside the loop.
    """
    import tensorflow as tf

    names = list(per_step or ())
    capacity = int(next(iter(per_step.values())).shape[0]) if names else 0
    mean = tf.distribute.ReduceOp.MEAN

    @as_written
    def run_step(element, index, arrays):
        values = strategy.run(replica_step, args=element)
        if not names:
            return arrays
        return [a.write(tf.cast(index, tf.int32), tf.cast(strategy.reduce(mean, values[name], axis=None), tf.float32))
                for a, name in zip(arrays, names)]

    @as_written  # the loops are written as tf.while_loop: no AutoGraph conversion to trace (graph_code)
    def loop(iterator, n):
        arrays = [tf.TensorArray(tf.float32, size=0, dynamic_size=True) for _ in names]
        if exhaustible:
            # `for _ in range(n)`, ending early (OutOfRange) when the input runs out
            def read_and_step(i, steps, ended, arrays):
                optional = iterator.get_next_as_optional()
                has_value = optional.has_value()
                steps, arrays = tf.cond(has_value, lambda: (steps + 1, run_step(optional.get_value(), steps, arrays)),
                                        lambda: (steps, arrays))
                return i + 1, steps, tf.logical_not(has_value), arrays

            zero = tf.constant(0, tf.int64)
            _, steps, _, arrays = tf.while_loop(lambda i, steps, ended, arrays: tf.logical_and(i < n, ~ended),
                                                read_and_step, (tf.zeros_like(n), zero, tf.constant(False), arrays))
        else:
            steps = tf.cast(n, tf.int64)
            _, arrays = tf.while_loop(lambda i, arrays: i < n,
                                      lambda i, arrays: (i + 1, run_step(next(iterator), i, arrays)),
                                      (tf.zeros_like(n), arrays))
        for name, array in zip(names, arrays):
            stacked = array.stack()
            per_step[name].assign(tf.pad(stacked, [[0, capacity - tf.shape(stacked)[0]]]))
        global_step.assign_add(steps)
        return steps

    return device_function(loop)


def make_scheduled_train_loop(strategy, replica_step: Callable, global_step, *, steps_per_invocation: int,
                              steps_by_worker: dict):
    """The parameter-server variant of `make_train_loop`: `loop(per_worker_iterator, n) -> n`.

    The coordinator (`tf.distribute.coordinator.ClusterCoordinator`) schedules ceil(n / k)
    invocations of a function running k = `steps_per_invocation` steps (the last one fewer)
    on whichever worker is free; the workers apply their updates to the variables on the ps
    tasks asynchronously. `join()` at the end makes the loop's end a boundary like any other
    (hooks, metrics, checkpoints). Each invocation returns the index of the worker that ran
    it: `steps_by_worker` ({worker index: steps}) adds them up.
    """
    import tensorflow as tf

    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)  # one per strategy (TF caches it)

    def invocation(iterator, k):
        for _ in tf.range(k):
            strategy.run(replica_step, args=next(iterator))
        global_step.assign_add(tf.cast(k, tf.int64))
        return tf.distribute.coordinator.experimental_get_current_worker_index()

    invocation = device_function(invocation)

    def loop(iterator, n):
        n = int(n)
        chunks = [min(steps_per_invocation, n - start) for start in range(0, n, steps_per_invocation)]
        results = [(coordinator.schedule(invocation, args=(iterator, tf.constant(k, tf.int64))), k) for k in chunks]
        coordinator.join()
        for remote, k in results:
            worker = int(remote.fetch())
            steps_by_worker[worker] = steps_by_worker.get(worker, 0) + k
        return tf.constant(n, tf.int64)

    return loop


def make_eval_loop(strategy, replica_step: Callable, *, carry_totals: bool = False):
    """Returns `loop(dist_dataset) -> (mean loss, example count)` running `replica_step` over
    every batch. With `carry_totals` (one replica) the step returns each batch's (loss sum,
    count) and the loop adds them up; otherwise the step updates metrics and the loop
    returns zeros."""
    import tensorflow as tf

    @as_written  # a tf.while_loop as written: no AutoGraph conversion to trace (graph_code)
    def loop(dist_dataset):
        # An iterator read in a `tf.while_loop`, not `for batch in dataset`: AutoGraph turns
        # the latter into `dataset.reduce`, whose body tf.data runs without Grappler's graph
        # optimisations; a while-loop body is optimised with the rest of the function. On
        # `linear` that made a whole evaluation pass ~20% faster (benchmarks/README.md).
        iterator = iter(dist_dataset)

        def one_batch(total, count, optional):
            batch = optional.get_value()
            out = strategy.run(replica_step, args=batch if isinstance(batch, tuple) else (batch,))
            if carry_totals:
                total, count = total + out[0], count + out[1]
            return total, count, iterator.get_next_as_optional()

        total, count, _ = tf.while_loop(lambda total, count, optional: optional.has_value(), one_batch,
                                        (tf.constant(0.0), tf.constant(0.0), iterator.get_next_as_optional()))
        return tf.math.divide_no_nan(total, count), count
    return device_function(loop)


def make_predict_step(strategy, replica_step: Callable, *, mask_key: str, every_worker: bool = False):
    """Returns `step(batch) -> {name: tensor}`: the replicas' results concatenated in order and
    the padding (`results[mask_key] == 0`) removed, in the same device call (the host only
    converts the results to numpy). `every_worker` (multi-worker): the results of the replicas
    of EVERY worker, gathered in replica order (`batching.worker_share` gives the workers
    consecutive slices of each global batch, so that is the input order) on every worker."""
    import tensorflow as tf

    def step(batch):
        results = strategy.run(replica_step, args=batch if isinstance(batch, tuple) else (batch,))
        if every_worker:
            local = {k: strategy.gather(v, axis=0) for k, v in results.items()}
        else:
            local = {k: tf.concat(strategy.experimental_local_results(v), 0) for k, v in results.items()}
        mask = local.pop(mask_key, None)
        if mask is None:  # unpadded batches
            return local
        return {k: tf.boolean_mask(v, mask > 0.5) for k, v in local.items()}
    return device_function(step)


def make_loop_reader(metrics, finite_variables=None):
    """Returns `read() -> {key: result}` reading every metric and then resetting it, in ONE
    device call (one host round trip per loop instead of one per metric and per reset).

    Args:
      metrics: {key: keras.metrics.Metric}.
      finite_variables: variables for the NaN/Inf sentinel, or None: with them, `read()` also
        returns `"__all_finite__"`, True when every floating variable is finite.
    """
    import tensorflow as tf

    metrics = dict(metrics)

    @as_written
    def read():
        results = {key: tf.identity(users_graph_code(metric.result)()) for key, metric in metrics.items()}
        with tf.control_dependencies(list(results.values())):
            for metric in metrics.values():
                users_graph_code(metric.reset_state)()
        if finite_variables is not None:
            results["__all_finite__"] = all_finite(finite_variables)
        return results
    return device_function(read)


@as_written
def all_finite(variables):
    """In a traced function: a boolean tensor, True when every floating variable is finite."""
    import tensorflow as tf

    checks = [tf.reduce_all(tf.math.is_finite(tf.cast(v, tf.float32))) for v in variables
              if tf.as_dtype(v.dtype).is_floating]
    return tf.reduce_all(tf.stack(checks)) if checks else tf.constant(True)
