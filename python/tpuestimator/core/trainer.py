"""The trainer: the training input and the device loops that read it, as in Orbit's
`StandardTrainer` beside its `Controller`.

`Trainer.run_loop(n)` runs one device loop of `n` steps and returns what it produced
(`LoopOutput`: steps run, the loop's metrics, per-step values, elapsed time); the outer loop
(`tpuestimator.core.controller.TrainController`) decides when, and acts on the outputs. The
trainer writes only its own fields.
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

from tpuestimator.core import steps as replica_steps
from tpuestimator.core.devices import is_parameter_server
from tpuestimator.core.input_position import train_dataset
from tpuestimator.core.loops import make_loop_reader, make_scheduled_train_loop, make_train_loop
from tpuestimator.errors import ConfigError


@dataclasses.dataclass
class TrainInput:
    """The training input of the current `train` calls and the device loop that reads it.

    Attributes:
      input_fn: the input function it came from (a new one builds a new TrainInput).
      iterator: the (distributed) iterator; kept across `train` calls.
      exhaustible: the dataset can end (finite, no `repeat`).
      loop: the train loop `tf.function` (`Trainer.swap_loop` replaces it).
      origin: the global step the input started from (the NaN/Inf replay restarts it there).
    """

    input_fn: Callable
    iterator: Any
    exhaustible: bool
    loop: Callable
    origin: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoopOutput:
    """What one device loop produced.

    Attributes:
      steps: steps it ran (fewer than asked: the input ended; 0: it had ended already).
      results: the loop's metrics as numpy values: `loss`, `report/<name>` and, with the
        NaN/Inf sentinel on, `__all_finite__` (weights and optimizer state).
      per_step_values: {name: each step's value} when recorded (`run_loop(per_step=True)`).
      elapsed: seconds the device call took.
    """

    steps: int
    results: Mapping[str, Any]
    per_step_values: Mapping[str, Any] | None
    elapsed: float


class Trainer:
    """Owns the training input and the train loops of one Estimator.

    Args:
      strategy: the `tf.distribute.Strategy`.
      state: the built `TrainingState`.
      config: the `RunConfig`.
      workers: worker count (parameter servers: each reads every n-th batch).

    Nothing here refers back to the Estimator: an Estimator that is dropped frees its
    iterators at once, not at a later garbage collection (freeing a mirrored iterator late
    can stall, see `core.workarounds`).

    Attributes:
      per_step_values: {name: per-step values of the last loop run with `per_step=True`}.
      steps_by_worker: parameter servers: {worker index: training steps it ran}.
    """

    def __init__(self, *, strategy, state, config, workers: int):
        self.strategy = strategy
        self.state = state
        self.config = config
        self.workers = workers
        self.train_input: TrainInput | None = None
        self.per_step_values: dict = {}
        self.steps_by_worker: dict = {}
        self._per_step_loop = None
        self._loop_readers: dict = {}  # finiteness checked or not -> reader

    def _make_train_step(self, *, per_step_values: bool = False):
        config = self.config
        forward_backward = replica_steps.make_forward_backward(
            self.state, config.train_batch_size, precision=config.precision, jit_compile=config.jit_compile)
        return replica_steps.make_train_step(self.state, forward_backward, per_step_values=per_step_values)

    def use_input(self, input_fn, *, params: dict, input_on_host: bool, built=None) -> TrainInput:
        """Builds (or reuses, for the same input_fn) the distributed training iterator and loop;
        `params` are the training input function's (`Estimator.input_params(Mode.TRAIN)`).
        `built`: the dataset `input_fn(params)` returns, already built (`InputFn.seeded`), read
        as it is on one host replica."""
        import tensorflow as tf

        if self.train_input is not None and self.train_input.input_fn is input_fn:
            return self.train_input
        if is_parameter_server(self.strategy) or not input_on_host:
            built = None  # each worker or input pipeline builds its own, in its own input context
        cardinalities = []

        def dataset_fn(ctx):
            # positioned at the current step: a resumed run reads the batches an uninterrupted one would
            ds = train_dataset(input_fn, dict(params, input_context=ctx)) if built is None else built
            # static under parameter servers (traced for the workers): None, i.e. not known to end
            cardinalities.append(tf.get_static_value(ds.cardinality()))
            return ds

        origin = self.state.step  # the NaN/Inf report replays the input from here
        if is_parameter_server(self.strategy):
            # Each worker builds its own copy of the input (the scheduled loop reads the copy of
            # whichever worker runs it) and keeps every n-th batch from its worker index on: the
            # copies are the same stream, so the workers share its batches without overlap (each
            # worker decodes all of them). The input must repeat (train.max_steps ends it).
            coordinator = tf.distribute.coordinator.ClusterCoordinator(self.strategy)
            workers = self.workers

            def worker_dataset_fn(ctx):
                index = tf.distribute.coordinator.experimental_get_current_worker_index()
                return dataset_fn(ctx).shard(workers, tf.cast(index, tf.int64))

            iterator = iter(coordinator.create_per_worker_dataset(
                lambda: self.strategy.distribute_datasets_from_function(worker_dataset_fn)))
        elif input_on_host:
            # One replica on the host CPU: a plain tf.data iterator, which is what the
            # strategy would hand the replica anyway, minus its MultiDeviceIterator hop that
            # costs ~0.3 ms of CPU per step and copies nothing (benchmarks/README.md).
            iterator = iter(dataset_fn(tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                                                  num_replicas_in_sync=1)))
        else:
            iterator = iter(self.strategy.distribute_datasets_from_function(dataset_fn))
        exhaustible = any(c is not None and c != tf.data.INFINITE_CARDINALITY for c in cardinalities)
        self.train_input = TrainInput(input_fn=input_fn, iterator=iterator, exhaustible=exhaustible,
                                      loop=self.new_loop(exhaustible), origin=origin)
        self._per_step_loop = None
        return self.train_input

    def release_input(self) -> None:
        """Drops the training iterator after an error; the next `use_input` builds one positioned
        at the global step, as a resumed run does. The error keeps the frames it passed through,
        and with them this Trainer: kept, its iterator would be freed by a later garbage
        collection, which can stall the process (`workarounds.drop_tensorflow_frame_locals`)."""
        self.train_input = None

    def new_loop(self, exhaustible: bool):
        """The train loop the strategy needs: one device call of n steps (`loops.make_train_loop`)
        or, under parameter servers, n steps scheduled on the workers (`make_scheduled_train_loop`)."""
        if is_parameter_server(self.strategy):
            return make_scheduled_train_loop(self.strategy, self._make_train_step(), self.state.global_step,
                                             steps_per_invocation=self.config.ps_steps_per_invocation,
                                             steps_by_worker=self.steps_by_worker)
        return make_train_loop(self.strategy, self._make_train_step(), self.state.global_step, exhaustible=exhaustible)

    def swap_loop(self, loop=None):
        """Replaces the train loop's `tf.function` from the next loop on; returns the old one
        (`Estimator.swap_train_loop`)."""
        current = self.train_input
        old = current.loop
        current.loop = self.new_loop(current.exhaustible) if loop is None else loop
        return old

    @property
    def per_step_buffers(self) -> dict | None:
        """The per-step value buffers, once a hook asked for per-step values (else None)."""
        return self._per_step_loop[1] if self._per_step_loop is not None else None

    def per_step_loop(self):
        """(loop, buffers): a train loop that also records each step's mean loss and report
        values into device-side variables of length `iterations_per_loop` (`HostCallHook`)."""
        import tensorflow as tf

        if is_parameter_server(self.strategy):
            raise ConfigError("run.strategy", "parameter_server", "a strategy other than parameter_server for "
                              "hooks that read per-step values (HostCallHook): workers run steps asynchronously")
        if self._per_step_loop is None:
            with self.strategy.scope():
                buffers = {name: tf.Variable(tf.zeros([self.config.iterations_per_loop], tf.float32), trainable=False,
                                             name=f"per_step_{name}", aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                           for name in ("loss", *self.state.report_names)}
            step_fn = self._make_train_step(per_step_values=True)
            self._per_step_loop = (make_train_loop(self.strategy, step_fn, self.state.global_step,
                                                   exhaustible=self.train_input.exhaustible, per_step=buffers),
                                   buffers)
        return self._per_step_loop

    def read_loop_metrics(self, *, finiteness: bool) -> dict:
        """The train metrics since the last read (reset as they are read) and, with `finiteness`
        (the NaN/Inf sentinel), the weights' finiteness as `__all_finite__`: one device call,
        built once per choice."""
        if finiteness not in self._loop_readers:
            state = self.state
            self._loop_readers[finiteness] = make_loop_reader(
                state.train_metrics, state.sentinel_variables() if finiteness else None)
        return {key: value.numpy() for key, value in self._loop_readers[finiteness]().items()}

    def reset_metrics(self) -> None:
        """The loop's metrics start from zero (`read_loop_metrics` resets them after each loop)."""
        for metric in self.state.train_metrics.values():
            metric.reset_state()

    def run_loop(self, n: int, *, per_step: bool = False, finiteness: bool = False) -> LoopOutput:
        """Runs one device loop of up to `n` steps on the current input and returns its output
        (`finiteness`: also whether the weights and optimizer state are finite)."""
        import tensorflow as tf

        recording = self.per_step_loop() if per_step else None
        loop = self.train_input.loop if recording is None else recording[0]  # a hook may have swapped the loop
        t0 = time.perf_counter()
        ran = int(loop(self.train_input.iterator, tf.constant(n, tf.int64)))
        elapsed = time.perf_counter() - t0
        if ran == 0:
            return LoopOutput(steps=0, results={}, per_step_values=None, elapsed=elapsed)
        if recording is not None:
            self.per_step_values = {name: buf.numpy()[:ran] for name, buf in recording[1].items()}
        return LoopOutput(steps=ran, results=self.read_loop_metrics(finiteness=finiteness),
                          per_step_values=self.per_step_values if recording is not None else None, elapsed=elapsed)
