"""The Estimator: one model function trained, evaluated, predicted and exported on any device.

TPUEstimator's semantics kept: GLOBAL batch sizes that divide by the replica count, the
input function receiving the per-replica `params['batch_size']`, `iterations_per_loop`
steps per device call, `steps` (incremental) versus `max_steps` (absolute), checkpoints in
`model_dir` with resume. Changed on purpose: evaluation and prediction cover every example
exactly once (the last partial batch is padded and masked, never dropped).
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from typing import Any, Callable, Iterable, Iterator, Mapping

from tpuestimator.errors import ConfigError, ModelFnError, NonFiniteError
from tpuestimator.hooks.base import HookList
from tpuestimator.spec import Mode, ModelSpec

logger = logging.getLogger(__name__)

MASK_KEY = "__mask__"


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunConfig:
    """How and where an Estimator runs. Batch sizes are GLOBAL (all replicas together)."""

    model_dir: str
    train_batch_size: int = 128
    eval_batch_size: int = 128
    predict_batch_size: int = 128
    iterations_per_loop: int = 100
    save_checkpoints_steps: int | None = 500
    keep_checkpoint_max: int = 5
    async_checkpoint: bool = False
    strategy: str = "auto"
    num_cpu_devices: int | None = None
    tpu: str | None = None
    zone: str | None = None
    project: str | None = None
    precision: str = "float32"
    jit_compile: bool = False
    seed: int | None = 42
    nan_sentinel: bool = True
    warm_start_from: str | None = None

    def __post_init__(self):
        for name in ("train_batch_size", "eval_batch_size", "predict_batch_size", "iterations_per_loop",
                     "keep_checkpoint_max"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(name, value, "a positive integer")
        if self.save_checkpoints_steps is not None and (
                not isinstance(self.save_checkpoints_steps, int) or self.save_checkpoints_steps < 1):
            raise ConfigError("save_checkpoints_steps", self.save_checkpoints_steps, "a positive integer or None")
        if self.precision not in ("float32", "mixed_bfloat16", "mixed_float16"):
            raise ConfigError("precision", self.precision, "one of 'float32', 'mixed_bfloat16', 'mixed_float16'")
        if not self.model_dir:
            raise ConfigError("model_dir", self.model_dir, "a folder for checkpoints")

    @classmethod
    def from_job(cls, job, model_dir: str | None = None) -> "RunConfig":
        """Builds a RunConfig from a `tpuestimator.config.JobConfig`."""
        raw = job.raw
        run, train = raw["run"], raw["train"]
        return cls(
            model_dir=model_dir or job.model_dir,
            train_batch_size=train["batch_size"], eval_batch_size=raw["eval"]["batch_size"],
            predict_batch_size=raw["predict"]["batch_size"], iterations_per_loop=train["iterations_per_loop"],
            save_checkpoints_steps=train["save_checkpoints_steps"], keep_checkpoint_max=train["keep_checkpoint_max"],
            async_checkpoint=train["async_checkpoint"], strategy=run["strategy"],
            num_cpu_devices=run["num_cpu_devices"], tpu=run["tpu"], zone=run["zone"], project=run["project"],
            precision=run["precision"], jit_compile=run["jit_compile"], seed=run["seed"],
            nan_sentinel=raw["debug"]["nan_sentinel"], warm_start_from=train["warm_start_from"])

    def run_section(self) -> dict:
        return {"strategy": self.strategy, "num_cpu_devices": self.num_cpu_devices, "tpu": self.tpu,
                "zone": self.zone, "project": self.project}


@contextlib.contextmanager
def _keras_async_checkpoint_fix():
    """Makes TF's async checkpoint work with Keras 3 variables, for the duration of a save.

    TF copies every checkpointed object to the host before writing in the background
    (`_copy_trackable_to_cpu`); from the second save on, the copy runs as a `tf.function`.
    Keras 3's TF variable creates a NEW `tf.Variable` for its copy on every call, which a
    `tf.function` refuses ("tf.function only supports singleton tf.Variables created on the
    first call"): with `async_checkpoint: true` the second save failed (TF 2.21, Keras 3.15).
    During the save each Keras variable maps to the host copy of the `tf.Variable` it wraps
    instead: the same checkpoint keys and values (benchmarks/bench_checkpoint.py checks).
    """
    try:
        from keras.src.backend.tensorflow.core import Variable
    except ImportError:  # another Keras layout: nothing to fix
        yield
        return
    original = Variable.__dict__.get("_copy_trackable_to_cpu")
    if original is None:
        yield
        return

    def copy_to_cpu(self, object_map):
        self.value._copy_trackable_to_cpu(object_map)
        object_map[self] = object_map[self.value]

    Variable._copy_trackable_to_cpu = copy_to_cpu
    try:
        yield
    finally:
        Variable._copy_trackable_to_cpu = original


def _single_or_dict(features):
    """The model receives the tensor alone when the features dict has one entry."""
    if isinstance(features, Mapping) and len(features) == 1:
        return next(iter(features.values()))
    return features


def _split(element):
    """(features, labels) or features alone -> (features dict, labels or None)."""
    import tensorflow as tf

    if isinstance(element, tuple):
        features, labels = element if len(element) == 2 else (element[0], None)
    else:
        features, labels = element, None
    if not isinstance(features, Mapping):
        features = {"x": features} if isinstance(features, tf.Tensor) or hasattr(features, "shape") else features
    return dict(features), labels


class Estimator:
    """Trains, evaluates, predicts and exports a model function on CPU, GPU or TPU.

    Args:
      model_fn: `model_fn(params) -> ModelSpec`, or a built-in name / 'module:function'.
      config: a `RunConfig`.
      params: the user's hyperparameters; the Estimator adds `batch_size` (per replica),
        `global_batch_size`, `num_replicas`, `device` and `feature_spec`.
      strategy: an existing `tf.distribute.Strategy` (default: built from `config`).
    """

    def __init__(self, model_fn: Callable[[dict], ModelSpec] | str, config: RunConfig,
                 params: Mapping[str, Any] | None = None, *, strategy=None):
        from tpuestimator.models import resolve_model_fn

        self.model_fn = resolve_model_fn(model_fn)
        self.config = config
        self.params = dict(params or {})
        self._strategy = strategy
        self._device = None
        self._spec: ModelSpec | None = None
        self._feature_spec = None
        self._train_iter = None  # (input_fn, iterator, exhaustible, loop)
        self._eval_fns: dict = {}
        self.stop_training = False
        self.last_train_logs: dict = {}
        self.per_step_values: dict = {}  # name -> per-step values of the last loop (HostCallHook only)
        self._per_step_loop = None
        # The NaN/Inf sentinel writes a report + repro bundle (tpuestimator.debug.sentinel) unless False;
        # `job_config` (set by run_job) is copied into the bundle.
        self.nonfinite_report = True
        self.job_config: dict | None = None

    # ------------------------------------------------------------------ devices
    @property
    def strategy(self):
        if self._strategy is None:
            from tpuestimator.devices import make_strategy

            self._strategy, self._device = make_strategy(self.config.run_section())
        elif self._device is None:
            from tpuestimator.devices import _info

            self._device = _info(type(self._strategy).__name__, self._strategy)
        return self._strategy

    @property
    def device_info(self):
        _ = self.strategy
        return self._device

    @property
    def num_replicas(self) -> int:
        return int(self.strategy.num_replicas_in_sync)

    def per_replica_batch(self, global_batch: int, field: str) -> int:
        n = self.num_replicas
        if global_batch % n:
            raise ConfigError(field, global_batch,
                              f"a multiple of the replica count ({n}, {self.device_info.strategy_name}); "
                              f"e.g. {max(n, global_batch // n * n)}")
        return global_batch // n

    # ------------------------------------------------------------------ building
    @property
    def model_dir(self) -> str:
        return self.config.model_dir

    @property
    def spec(self) -> ModelSpec:
        if self._spec is None:
            raise RuntimeError("The model is not built yet: call train(), evaluate() or predict() first.")
        return self._spec

    @property
    def model(self):
        return self.spec.model

    def _params(self, mode: Mode, global_batch: int, field: str, input_context=None) -> dict:
        params = dict(self.params)
        params.update(batch_size=self.per_replica_batch(global_batch, field), global_batch_size=global_batch,
                      num_replicas=self.num_replicas, device=self.device_info.kind, mode=mode.value,
                      input_context=input_context, seed=self.config.seed,
                      start_step=int(self._step.numpy()) if self._spec is not None else 0)
        return params

    def _ensure_built(self, input_fn, mode: Mode, global_batch: int, field: str) -> None:
        if self._spec is not None:
            return
        import keras
        import tensorflow as tf

        if self.config.seed is not None:
            keras.utils.set_random_seed(self.config.seed)
        probe = input_fn(self._params(mode, global_batch, field))
        features_spec, _ = _split(probe.element_spec)
        self._feature_spec = {name: (tuple(s.shape[1:]), s.dtype.name) for name, s in features_spec.items()}
        params = self._params(mode, global_batch, field)
        params["feature_spec"] = dict(self._feature_spec)
        for key in ("input_context", "mode", "start_step"):
            params.pop(key, None)
        previous_policy = keras.mixed_precision.global_policy()
        keras.mixed_precision.set_global_policy(self.config.precision)
        try:
            with self.strategy.scope():
                spec = self.model_fn(params)
                if not isinstance(spec, ModelSpec):
                    raise ModelFnError(f"The model function must return a tpuestimator.ModelSpec. Received: {type(spec).__name__}")
                optimizer = spec.optimizer() if callable(spec.optimizer) and not hasattr(spec.optimizer, "apply_gradients") else spec.optimizer
                if self.config.precision == "mixed_float16" and not isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
                    optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
                if not spec.model.built:
                    spec.model.build({k: (None, *s) for k, (s, _) in self._feature_spec.items()})
                optimizer.build(spec.model.trainable_variables)
                self._step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step",
                                         aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                self._train_loss = keras.metrics.Mean(name="loss")
                self._report = {name: keras.metrics.Mean(name=name) for name in spec.report}
                self._eval_loss = keras.metrics.Mean(name="loss")
                self._eval_metrics = {}
                for name, metric in spec.metrics.items():
                    if isinstance(metric, keras.metrics.Metric):
                        self._eval_metrics[name] = (metric, None)
                    elif callable(metric):
                        self._eval_metrics[name] = (keras.metrics.Mean(name=name), metric)
                    else:
                        raise ModelFnError(f"ModelSpec.metrics['{name}'] must be a keras.metrics.Metric or a callable. Received: {metric!r}")
                self._eval_count = keras.metrics.Sum(name="num_examples")
        finally:
            keras.mixed_precision.set_global_policy(previous_policy)
        self._spec = dataclasses.replace(spec, optimizer=optimizer)
        self._optimizer = optimizer
        self._checkpoint = tf.train.Checkpoint(model=spec.model, optimizer=optimizer, step=self._step)
        self._manager = tf.train.CheckpointManager(self._checkpoint, self._checkpoint_dir(),
                                                   max_to_keep=self.config.keep_checkpoint_max,
                                                   step_counter=self._step)
        self._restore()

    def _checkpoint_dir(self) -> str:
        from tpuestimator.devices import tf_config_task

        task = tf_config_task()
        # Multi-worker: only the chief writes the real checkpoints; other workers must still
        # save (collective ops) but into a scratch folder that is removed.
        if task and not (task.get("type") in ("chief",) or (task.get("type") == "worker" and task.get("index") == 0)):
            return os.path.join(self.model_dir, f".worker_{task.get('type')}_{task.get('index')}")
        return self.model_dir

    def _restore(self) -> None:
        import tensorflow as tf

        latest = self._manager.latest_checkpoint
        if latest:
            self._checkpoint.restore(latest).assert_existing_objects_matched()
            logger.info("restored %s at global step %d", latest, int(self._step.numpy()))
            return
        ws = self.config.warm_start_from
        if ws:
            path = tf.train.latest_checkpoint(ws) if os.path.isdir(ws) else ws
            if not path:
                raise ConfigError("train.warm_start_from", ws, "a model dir holding a checkpoint, or a checkpoint path")
            tf.train.Checkpoint(model=self._spec.model).restore(path).expect_partial()
            logger.info("warm-started the model's weights from %s", path)

    @property
    def global_step(self) -> int:
        return int(self._step.numpy()) if self._spec is not None else self._latest_step_on_disk()

    def _latest_step_on_disk(self) -> int:
        import tensorflow as tf

        latest = tf.train.latest_checkpoint(self.model_dir)
        return int(latest.rsplit("-", 1)[-1]) if latest else 0

    def latest_checkpoint(self) -> str | None:
        import tensorflow as tf

        return tf.train.latest_checkpoint(self.model_dir)

    # ------------------------------------------------------------------ train
    def _call_model(self, features, training: bool):
        return self._spec.model(_single_or_dict(features), training=training)

    def _make_forward_backward(self, global_batch: int):
        """`forward_backward(features, labels) -> (per_example, grads, reports)` of one replica
        (shared by the device loop and the host-side replay in `tpuestimator.debug`)."""
        import tensorflow as tf

        spec, optimizer = self._spec, self._optimizer
        model = spec.model
        loss_scaled = hasattr(optimizer, "scale_loss") and self.config.precision == "mixed_float16"

        def forward_backward(features, labels):
            with tf.GradientTape() as tape:
                outputs = self._call_model(features, training=True)
                per_example = tf.cast(spec.loss(labels, outputs), tf.float32)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
                if model.losses:
                    loss += tf.nn.scale_regularization_loss(tf.add_n([tf.cast(l, tf.float32) for l in model.losses]))
                to_differentiate = optimizer.scale_loss(loss) if loss_scaled else loss
            grads = tape.gradient(to_differentiate, model.trainable_variables)
            reports = {name: fn(labels, outputs) for name, fn in spec.report.items()}
            return per_example, grads, reports

        if self.config.jit_compile:
            # XLA compiles forward and backward (the TPU compiler's view of the model); the
            # cross-replica all-reduce inside apply_gradients stays outside the cluster.
            forward_backward = tf.function(forward_backward, jit_compile=True)
        return forward_backward

    def _make_train_step(self, global_batch: int, *, per_step_values: bool = False):
        """The replica step of the train loop; with `per_step_values` it also returns this
        replica's mean loss and report values (for `HostCallHook`; off by default)."""
        import tensorflow as tf

        model, optimizer = self._spec.model, self._optimizer
        forward_backward = self._make_forward_backward(global_batch)

        def replica_step(*element):
            features, labels = _split(element if len(element) > 1 else element[0])
            per_example, grads, reports = forward_backward(features, labels)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            self._train_loss.update_state(per_example)
            for name, value in reports.items():
                self._report[name].update_state(value)
            if per_step_values:
                return {"loss": tf.reduce_mean(per_example),
                        **{name: tf.reduce_mean(tf.cast(value, tf.float32)) for name, value in reports.items()}}
        return replica_step

    def _train_iterator(self, input_fn):
        """Builds (or reuses, for the same input_fn) the distributed training iterator."""
        import tensorflow as tf

        if self._train_iter is not None and self._train_iter[0] is input_fn:
            return self._train_iter
        global_batch = self.config.train_batch_size
        cardinalities = []

        def dataset_fn(ctx):
            params = self._params(Mode.TRAIN, global_batch, "train.batch_size", input_context=ctx)
            ds = input_fn(params)
            cardinalities.append(int(ds.cardinality().numpy()))
            return ds

        # The global step the input starts from: the NaN/Inf report replays the input from here.
        self._train_input_origin = int(self._step.numpy())
        if self._input_on_host():
            # One replica on the host CPU: a plain tf.data iterator, which is what the
            # strategy would hand the replica anyway, minus its MultiDeviceIterator hop that
            # costs ~0.3 ms of CPU per step and copies nothing (benchmarks/README.md).
            iterator = iter(dataset_fn(tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                                                  num_replicas_in_sync=1)))
        else:
            iterator = iter(self.strategy.distribute_datasets_from_function(dataset_fn))
        exhaustible = any(c != tf.data.INFINITE_CARDINALITY for c in cardinalities)
        from tpuestimator.loops import make_train_loop

        loop = make_train_loop(self.strategy, self._make_train_step(global_batch), self._step, exhaustible=exhaustible)
        self._train_iter = (input_fn, iterator, exhaustible, loop)
        self._per_step_loop = None
        return self._train_iter

    def _input_on_host(self) -> bool:
        """True when the strategy is one replica on the host CPU (input needs no distributing)."""
        import tensorflow as tf

        strategy = self.strategy
        if not isinstance(strategy, tf.distribute.OneDeviceStrategy):
            return False
        devices = tuple(getattr(strategy.extended, "worker_devices", ()) or ())
        return len(devices) == 1 and tf.DeviceSpec.from_string(devices[0]).device_type == "CPU"

    def swap_train_loop(self, loop=None):
        """Replaces the train loop's `tf.function` from the next loop on; returns the old one.

        With `loop=None` a fresh one is built, so the next loop traces anew: op callbacks such
        as Debugger V2 dumps (`tpuestimator.debug.DumpHook`) instrument graphs at trace time.
        Pass the returned function back to restore the original (no retrace). Call it from a
        hook (`before_loop`/`after_loop`) while `train()` runs.
        """
        from tpuestimator.loops import make_train_loop

        input_fn, iterator, exhaustible, old = self._train_iter
        if loop is None:
            loop = make_train_loop(self.strategy, self._make_train_step(self.config.train_batch_size), self._step,
                                   exhaustible=exhaustible)
        self._train_iter = (input_fn, iterator, exhaustible, loop)
        return old

    def _make_per_step_loop(self):
        """(loop, buffers): a train loop that also records each step's mean loss and report
        values into device-side variables of length `iterations_per_loop` (`HostCallHook`)."""
        import tensorflow as tf

        from tpuestimator.loops import make_train_loop

        if self._per_step_loop is None:
            _, _, exhaustible, _ = self._train_iter
            with self.strategy.scope():
                buffers = {name: tf.Variable(tf.zeros([self.config.iterations_per_loop], tf.float32), trainable=False,
                                             name=f"per_step_{name}", aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                           for name in ("loss", *self._report)}
            step_fn = self._make_train_step(self.config.train_batch_size, per_step_values=True)
            self._per_step_loop = (make_train_loop(self.strategy, step_fn, self._step, exhaustible=exhaustible,
                                                   per_step=buffers), buffers)
        return self._per_step_loop

    def train(self, input_fn, steps: int | None = None, max_steps: int | None = None,
              hooks: Iterable[Any] = (), *, save_final_checkpoint: bool = True) -> "Estimator":
        """Trains the model.

        Args:
          input_fn: `input_fn(params) -> tf.data.Dataset` of (features, labels) batches of
            `params['batch_size']` (per replica).
          steps: train this many steps on top of the current global step (incremental:
            two calls of train(steps=10) train 20 steps). None: until `max_steps` or until
            the input ends.
          max_steps: train until the global step reaches this (absolute: a second call with
            the same value trains nothing).
          hooks: `tpuestimator.hooks.Hook` objects or callables `fn(event, info)`.

        Returns:
          self, for chaining.

        Raises:
          ValueError: both `steps` and `max_steps` given, or a non-positive value.
          NonFiniteError: the loss or weights went NaN/Inf (the NaN/Inf sentinel).
        """
        if steps is not None and max_steps is not None:
            raise ValueError("Can not provide both steps and max_steps: `steps` counts from the current global "
                             f"step, `max_steps` is absolute. Received: steps={steps}, max_steps={max_steps}")
        for name, value in (("steps", steps), ("max_steps", max_steps)):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"`{name}` ({value!r}) must be a positive integer or None.")
        self._ensure_built(input_fn, Mode.TRAIN, self.config.train_batch_size, "train.batch_size")
        start = int(self._step.numpy())
        target = start + steps if steps is not None else max_steps
        if target is not None and start >= target:
            logger.info("global step %d already reached max_steps=%d; nothing to train", start, target)
            return self
        import tensorflow as tf

        hook_list = HookList(hooks)
        hook_list.set_estimator(self)
        self.stop_training = False
        if hook_list.stop_training:  # a hook asked to stop before this call (e.g. early stopping after an eval)
            self.stop_training = True
            return self
        _, iterator, exhaustible, loop = self._train_iterator(input_fn)
        ipl = self.config.iterations_per_loop
        save_every = self.config.save_checkpoints_steps
        sentinel = self._make_sentinel() if self.config.nan_sentinel else None
        read_loop = self._loop_reader()
        # Hooks that need a loop boundary at given steps (profiler, dumps) shorten the loops around them.
        boundary_hooks = [h for h in hook_list.hooks if callable(getattr(h, "steps_to_boundary", None))]
        per_step = self._make_per_step_loop() \
            if any(getattr(h, "wants_per_step_values", False) for h in hook_list.hooks) else None
        self.per_step_values = {}
        hook_list.begin(start, {"max_steps": target, "model_dir": self.model_dir, "num_replicas": self.num_replicas,
                                "global_batch_size": self.config.train_batch_size})
        step = start
        last_saved = start
        logs: dict = {}
        # The loop's metrics start from zero; `read_loop` resets them as it reads them after each loop.
        self._train_loss.reset_state()
        for metric in self._report.values():
            metric.reset_state()
        try:
            while target is None or step < target:
                n = ipl if target is None else min(ipl, target - step)
                for h in boundary_hooks:
                    cap = h.steps_to_boundary(step)
                    if cap:
                        n = min(n, int(cap))
                hook_list.before_loop(step)
                loop = self._train_iter[3] if per_step is None else per_step[0]  # a hook may swap the loop
                t0 = time.perf_counter()
                ran = int(loop(iterator, tf.constant(n, tf.int64)))
                elapsed = time.perf_counter() - t0
                step += ran
                if ran == 0:
                    break
                if per_step is not None:
                    self.per_step_values = {name: buf.numpy()[:ran] for name, buf in per_step[1].items()}
                results = {key: value.numpy() for key, value in read_loop().items()}
                logs = {"loss": float(results["loss"]), "steps": ran,
                        "steps_per_sec": ran / elapsed if elapsed > 0 else float("inf"),
                        "examples_per_sec": ran * self.config.train_batch_size / elapsed if elapsed > 0 else float("inf"),
                        **{name: float(results[f"report/{name}"]) for name in self._report}}
                if sentinel is not None:
                    sentinel(step, logs, last_saved, weights_finite=bool(results["__all_finite__"]))
                self.last_train_logs = logs
                hook_list.after_loop(step, logs)
                if save_every and step // save_every > last_saved // save_every:
                    self.save_checkpoint()
                    last_saved = step
                if ran < n or hook_list.stop_training or self.stop_training:
                    break
            if save_final_checkpoint and step != last_saved:
                self.save_checkpoint()
            self._sync_checkpoints()  # train() returns with its checkpoints on disk
        except BaseException as exc:
            hook_list.on_exception(step, exc)
            raise
        if hook_list.stop_training:
            self.stop_training = True
        hook_list.end(step, logs)
        return self

    def _loop_reader(self):
        """The per-loop read of the train metrics (reset as they are read) and, with the
        sentinel on, of the weights' finiteness: one device call, built once per Estimator."""
        reader = getattr(self, "_loop_reader_fn", None)
        if reader is None:
            from tpuestimator.loops import make_loop_reader

            metrics = {"loss": self._train_loss, **{f"report/{name}": m for name, m in self._report.items()}}
            reader = make_loop_reader(metrics, self._sentinel_variables() if self.config.nan_sentinel else None)
            self._loop_reader_fn = reader
        return reader

    def _sentinel_variables(self) -> list:
        """What the NaN/Inf sentinel checks: the trainable weights and the optimizer's state
        (e.g. Adam's moments, which can overflow while the weights stay finite), so that no
        checkpoint with a non-finite value is ever written."""
        return [*self._spec.model.trainable_variables, *self._optimizer.variables]

    def _make_sentinel(self):
        import math

        all_finite = getattr(self, "_all_finite_fn", None)
        if all_finite is None:  # built once per Estimator: tracing it costs ~30 ms per train() call
            from tpuestimator.loops import make_all_finite

            all_finite = self._all_finite_fn = make_all_finite(self._sentinel_variables())

        def check(step: int, logs: dict, last_saved: int, weights_finite: bool | None = None) -> None:
            what = None
            if not math.isfinite(logs["loss"]):
                what = "loss"
            elif not (weights_finite if weights_finite is not None else bool(all_finite())):
                what = "weights"
            if what:
                latest = self._manager.latest_checkpoint
                error = NonFiniteError(
                    f"Training stopped at global step {step}: the {what} became NaN or Inf during the loop of steps "
                    f"{step - logs['steps']}..{step}. No checkpoint was written for it; the last finite checkpoint is "
                    f"{latest or 'none (no checkpoint was saved yet)'}. Lower params.learning_rate, check the input "
                    "data (input assertions: data.assertions), or rerun with debug.check_numerics: true to find the op.",
                    step=step, what=what, last_good_checkpoint=latest)
                self._write_nonfinite_report(error, loop_start=step - logs["steps"], loss=logs["loss"])
                raise error
        return check

    def _write_nonfinite_report(self, error: NonFiniteError, *, loop_start: int, loss: float) -> None:
        """The sentinel's report and repro bundle (`tpuestimator.debug.sentinel`); never hides the error."""
        if not self.nonfinite_report:
            return
        try:
            from tpuestimator.debug.sentinel import write_report

            write_report(self, error, loop_start=loop_start, loss=loss)
        except Exception:  # noqa: BLE001 - the report is a diagnosis aid; the NonFiniteError must surface
            logger.exception("could not write the NaN/Inf report")

    def save_checkpoint(self) -> str:
        """Saves a checkpoint at the current global step; returns its path."""
        import tensorflow as tf

        if not self.config.async_checkpoint:
            path = self._manager.save(checkpoint_number=self._step)
        else:
            # The write runs in a background thread; the `checkpoint` file (latest_checkpoint)
            # names the new checkpoint once it is complete. The next save waits for it.
            options = tf.train.CheckpointOptions(experimental_enable_async_checkpoint=True)
            with _keras_async_checkpoint_fix():
                path = self._manager.save(checkpoint_number=self._step, options=options)
        logger.info("saved checkpoint %s", path)
        return path

    def _sync_checkpoints(self) -> None:
        """Waits for an asynchronous checkpoint write to finish (no-op otherwise)."""
        sync = getattr(getattr(self, "_checkpoint", None), "sync", None)
        if self.config.async_checkpoint and callable(sync):
            sync()

    # ------------------------------------------------------------------ eval / predict
    def _padded_distributed(self, input_fn, mode: Mode, global_batch: int, field: str, steps: int | None):
        """The input as global batches padded to a static size, with a mask, distributed.

        Each per-replica batch (the last one possibly partial) is padded to the per-replica
        size; then groups of `num_replicas` batches are padded with all-masked batches and
        concatenated into one global batch, which the strategy splits back in order. Every
        example is seen exactly once and all shapes stay static (as TPUs require).
        """
        import tensorflow as tf

        per_replica = self.per_replica_batch(global_batch, field)
        replicas = self.num_replicas
        ds = input_fn(self._params(mode, global_batch, field))

        def pad_to(x, size):
            n = tf.shape(x)[0]
            paddings = [[0, size - n]] + [[0, 0]] * (len(x.shape) - 1)
            out = tf.pad(x, paddings)
            return tf.ensure_shape(out, [size] + list(x.shape[1:]))

        def pad_batch(*element):
            features, labels = _split(element if len(element) > 1 else element[0])
            n = tf.shape(next(iter(features.values())))[0]
            out = {k: pad_to(v, per_replica) for k, v in features.items()}
            out[MASK_KEY] = tf.sequence_mask(n, per_replica, dtype=tf.float32)
            if labels is not None:
                return out, pad_to(labels, per_replica)
            return (out,)

        def merge_group(*element):
            def flatten(x):
                x = pad_to(x, replicas)
                return tf.reshape(x, [replicas * per_replica] + list(x.shape[2:]))
            return tf.nest.map_structure(flatten, element)

        ds = ds.map(pad_batch)
        if replicas > 1:  # with one replica the group is the batch itself
            ds = ds.batch(replicas).map(merge_group)
        if steps is not None:
            ds = ds.take(steps)
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        ds = ds.with_options(options).prefetch(tf.data.AUTOTUNE)
        if self._input_on_host():
            return ds  # one replica on the host CPU: nothing to distribute (see `_train_iterator`)
        return self.strategy.experimental_distribute_dataset(ds)

    def evaluate(self, input_fn, steps: int | None = None, hooks: Iterable[Any] = (),
                 checkpoint_path: str | None = None) -> dict:
        """Evaluates the model.

        Args:
          input_fn: as for `train`, but one pass, unshuffled, the last batch may be partial.
          steps: evaluate this many global batches; None (default) evaluates every example
            exactly once, padding and masking the last partial batch.
          checkpoint_path: evaluate these weights instead of the current/latest ones.

        Returns:
          dict of metric name -> float, plus `global_step` and `num_examples`.
        """
        import tensorflow as tf

        self._ensure_built(input_fn, Mode.EVAL, self.config.eval_batch_size, "eval.batch_size")
        if checkpoint_path:
            self._checkpoint.restore(checkpoint_path).expect_partial()
        if "eval" not in self._eval_fns:
            spec = self._spec
            metrics = self._eval_metrics

            def replica_step(features, labels):
                features = dict(features)
                mask = features.pop(MASK_KEY)
                outputs = self._call_model(features, training=False)
                per_example = tf.cast(spec.loss(labels, outputs), tf.float32)
                self._eval_loss.update_state(per_example, sample_weight=mask)
                self._eval_count.update_state(mask)
                for metric, fn in metrics.values():
                    if fn is None:
                        metric.update_state(labels, outputs, sample_weight=mask)
                    else:
                        metric.update_state(fn(labels, outputs), sample_weight=mask)

            from tpuestimator.loops import make_eval_loop

            self._eval_fns["eval"] = make_eval_loop(self.strategy, replica_step)
        for metric in [self._eval_loss, self._eval_count, *(m for m, _ in self._eval_metrics.values())]:
            metric.reset_state()
        dist = self._padded_distributed(input_fn, Mode.EVAL, self.config.eval_batch_size, "eval.batch_size", steps)
        hook_list = HookList(hooks)
        hook_list.set_estimator(self)
        self._eval_fns["eval"](iter(dist) if isinstance(dist, tf.data.Dataset) else dist)
        results = {"loss": float(self._eval_loss.result())}
        for name, (metric, _) in self._eval_metrics.items():
            value = metric.result()
            results[name] = float(value) if getattr(value, "shape", ()) == () else value.numpy().tolist()
        results["num_examples"] = int(self._eval_count.result())
        results["global_step"] = int(self._step.numpy())
        hook_list.after_eval(results["global_step"], results)
        logger.debug("eval at step %d: %s", results["global_step"], results)
        return results

    def predict(self, input_fn, *, yield_single_examples: bool = True) -> Iterator[dict]:
        """Yields one dict of predictions per real example (padding removed).

        With `class_names` in the model spec, each dict holds `class` (the class string),
        as in the seed article's prediction outputs.
        """
        import numpy as np

        self._ensure_built(input_fn, Mode.PREDICT, self.config.predict_batch_size, "predict.batch_size")
        if "predict" not in self._eval_fns:
            spec = self._spec

            def replica_step(features, labels=None):
                features = dict(features)
                mask = features.pop(MASK_KEY)
                outputs = self._call_model(features, training=False)
                preds = dict(spec.predictions(outputs)) if spec.predictions else {"outputs": outputs}
                preds[MASK_KEY] = mask
                return preds

            from tpuestimator.loops import make_predict_step

            self._eval_fns["predict"] = make_predict_step(self.strategy, replica_step)
        step = self._eval_fns["predict"]
        names = np.asarray(self._spec.class_names) if self._spec.class_names else None
        dist = self._padded_distributed(input_fn, Mode.PREDICT, self.config.predict_batch_size,
                                        "predict.batch_size", None)
        for batch in dist:
            results = step(batch)
            local = {k: np.concatenate([np.asarray(t) for t in self.strategy.experimental_local_results(v)])
                     for k, v in results.items()}
            keep = local.pop(MASK_KEY) > 0.5
            local = {k: v[keep] for k, v in local.items()}
            if names is not None and "class_id" in local:
                local["class"] = names[local["class_id"]]
            if yield_single_examples:
                for i in range(int(keep.sum())):
                    yield {k: v[i] for k, v in local.items()}
            else:
                yield local

    # ------------------------------------------------------------------ export
    def serving_module(self):
        """A `tf.Module` holding the model and its `serving_default` function."""
        import tensorflow as tf

        spec = self.spec
        inputs = spec.serving_inputs or {name: tf.TensorSpec(shape, tf.as_dtype(dtype), name=name)
                                         for name, (shape, dtype) in self._feature_spec.items()}
        signature = {name: tf.TensorSpec([None, *s.shape], s.dtype, name=name) for name, s in inputs.items()}
        class_names = list(spec.class_names) if spec.class_names else None
        module = tf.Module()
        module.model = spec.model

        @tf.function(input_signature=[signature])
        def serve(features):
            model_features = spec.serving_preprocess(features) if spec.serving_preprocess else features
            outputs = spec.model(_single_or_dict(model_features), training=False)
            preds = dict(spec.predictions(outputs)) if spec.predictions else {"outputs": outputs}
            preds = {k: tf.cast(v, tf.float32) if v.dtype in (tf.float16, tf.bfloat16) else v for k, v in preds.items()}
            if class_names is not None and "class_id" in preds:
                preds["class"] = tf.gather(tf.constant(class_names), preds["class_id"])
            return preds

        module.serve = serve
        return module

    def export_saved_model(self, export_dir_base: str, *, version: int | None = None,
                           checkpoint_path: str | None = None) -> str:
        """Writes a versioned SavedModel for TF Serving: `<export_dir_base>/<version>/`.

        The version defaults to a timestamp in seconds (TF Serving serves the highest). The
        folder appears atomically: a crash mid-export leaves nothing behind.

        Returns:
          The export's path.
        """
        import tensorflow as tf

        from tpuestimator.io import atomic_directory

        if self._spec is None:
            raise RuntimeError("Nothing to export: train, evaluate or predict first so the model is built "
                               "(or use tpuestimator.job.export_job(model_dir) to export from checkpoints).")
        if checkpoint_path:
            self._checkpoint.restore(checkpoint_path).expect_partial()
        version = int(time.time()) if version is None else int(version)
        while os.path.exists(os.path.join(export_dir_base, str(version))):
            version += 1
        final = os.path.join(export_dir_base, str(version))
        module = self.serving_module()
        with atomic_directory(final) as tmp:
            tf.saved_model.save(module, str(tmp), signatures={"serving_default": module.serve})
        logger.info("exported SavedModel to %s", final)
        return final
