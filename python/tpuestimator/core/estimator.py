"""The Estimator: one model function trained, evaluated, predicted and exported on any device.

TPUEstimator's semantics kept: GLOBAL batch sizes that divide by the replica count, the
input function receiving the per-replica `params['batch_size']`, `iterations_per_loop`
steps per device call, `steps` (incremental) versus `max_steps` (absolute), checkpoints in
`model_dir` with resume. Changed on purpose: evaluation and prediction cover every example
exactly once (the last partial batch is padded and masked, never dropped).

The Estimator is the facade users call. What it builds is public: `Estimator.state`
(`core.state.TrainingState`), `Estimator.trainer` (the training input and its device loops,
`core.trainer`), `Estimator.evaluator` (evaluation and prediction, `core.evaluator`). A
`train` call goes `TrainController.train_to` (`core.controller`) -> `Trainer.run_loop` -> the loop
(`core.loops`) -> `strategy.run` -> the replica step (`core.steps`): docs/ARCHITECTURE.md.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from tpuestimator.core import checkpointing
from tpuestimator.core import steps as replica_steps
from tpuestimator.core.batching import MASK_KEY
from tpuestimator.core.controller import TrainController
from tpuestimator.core.devices import describe_strategy, input_on_host, make_strategy
from tpuestimator.core.evaluator import Evaluator
from tpuestimator.core.hooks import HookList
from tpuestimator.core.input_fn import declarations
from tpuestimator.core.run_config import RunConfig
from tpuestimator.core.signatures import serving_module, write_saved_model
from tpuestimator.core.state import TrainingState, build_state
from tpuestimator.core.trainer import Trainer, TrainInput
from tpuestimator.errors import ConfigError
from tpuestimator.models import resolve_model_fn
from tpuestimator.spec import Mode, ModelSpec, split_element

__all__ = ["Estimator", "RunConfig", "TrainInput", "MASK_KEY"]

logger = logging.getLogger(__name__)

# mode -> (RunConfig batch-size field, config key named in errors)
_BATCH_FIELDS = {Mode.TRAIN: ("train_batch_size", "train.batch_size"),
                 Mode.EVAL: ("eval_batch_size", "eval.batch_size"),
                 Mode.PREDICT: ("predict_batch_size", "predict.batch_size")}


class Estimator:
    """Trains, evaluates, predicts and exports a model function on CPU, GPU or TPU.

    Args:
      model_fn: `model_fn(params) -> ModelSpec`, or a built-in name / 'module:function'.
      config: a `RunConfig`.
      params: the user's hyperparameters; the Estimator adds `batch_size` (per replica),
        `global_batch_size`, `num_replicas`, `device` and `feature_spec`.
      strategy: an existing `tf.distribute.Strategy` (default: built from `config`).

    Attributes:
      stop_training: True when the last `train` call ended because a hook asked to stop
        (`Hook.stop_training`).
      last_train_logs: the last device loop's logs of the last `train` call.
    """

    def __init__(self, model_fn: Callable[[dict], ModelSpec] | str, config: RunConfig,
                 params: Mapping[str, Any] | None = None, *, strategy=None):
        self.model_fn = resolve_model_fn(model_fn)
        self.config = config
        self.params = dict(params or {})
        self._strategy = strategy
        self._device = None
        self._state: TrainingState | None = None
        self._trainer: Trainer | None = None
        self._evaluator: Evaluator | None = None
        self._train_probe: tuple | None = None  # (input_fn, its probe's dataset): `InputFn.seeded`
        self.stop_training = False
        self.last_train_logs: dict = {}

    # ------------------------------------------------------------------ devices
    @property
    def strategy(self):
        if self._strategy is None:
            self._strategy, self._device = make_strategy(self.config)
        elif self._device is None:
            self._device = describe_strategy(type(self._strategy).__name__, self._strategy)
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
    def built(self) -> bool:
        return self._state is not None

    @property
    def state(self) -> TrainingState:
        """The public training state (model, optimizer, global step, checkpoints, metrics)."""
        if self._state is None:
            raise RuntimeError("The model is not built yet: call train(), evaluate() or predict() first.")
        return self._state

    @property
    def spec(self) -> ModelSpec:
        return self.state.spec

    @property
    def model(self):
        return self.spec.model

    @property
    def feature_spec(self) -> dict:
        """{feature name: (shape without the batch, dtype name)} of the input the model was built on."""
        return dict(self.state.feature_spec)

    @property
    def train_input(self) -> TrainInput | None:
        """The current training input and its device loop (None before `train`)."""
        return self._trainer.train_input if self._trainer is not None else None

    @property
    def per_step_values(self) -> dict:
        """{name: per-step values of the last loop} (only with a hook that declares
        `wants_per_step_values`, e.g. `HostCallHook`)."""
        return self._trainer.per_step_values if self._trainer is not None else {}

    @property
    def steps_by_worker(self) -> dict:
        """`run.strategy: parameter_server`: {worker index: training steps it ran}."""
        return self._trainer.steps_by_worker if self._trainer is not None else {}

    def global_batch(self, mode: Mode) -> tuple[int, str]:
        """(the mode's GLOBAL batch size, its config key for error messages)."""
        field, key = _BATCH_FIELDS[Mode(mode)]
        return getattr(self.config, field), key

    def input_params(self, mode: Mode, *, global_batch: int | None = None, input_context=None) -> dict:
        """The `params` an input function receives in `mode` (see docs/ARCHITECTURE.md)."""
        batch, field = self.global_batch(mode)
        global_batch = batch if global_batch is None else global_batch
        params = dict(self.params)
        params.update(batch_size=self.per_replica_batch(global_batch, field), global_batch_size=global_batch,
                      num_replicas=self.num_replicas, device=self.device_info.kind, mode=Mode(mode).value,
                      input_context=input_context, seed=self.config.seed,
                      start_step=self._state.step if self._state is not None else 0)
        return params

    def build(self, input_fn, mode: Mode = Mode.TRAIN, *, global_batch: int | None = None) -> TrainingState:
        """Builds the model from one probe of `input_fn` (its element spec) and restores the
        latest checkpoint (or warm-starts); a no-op once built. Returns the training state."""
        if self._state is None:
            self._state = self._build_state(input_fn, mode, global_batch)
            checkpointing.restore(self._state, self.config.warm_start_from, self.model_dir)
        return self._state

    def _build_state(self, input_fn, mode: Mode, global_batch: int | None) -> TrainingState:
        import keras

        if self.config.seed is not None:
            keras.utils.set_random_seed(self.config.seed)
        probe = input_fn(self.input_params(mode, global_batch=global_batch))
        features_spec, _ = split_element(probe.element_spec)
        # `data.transpose_input`: the model receives some features with the batch on another axis
        # (`InputFn.batch_axes`); the feature spec keeps the layout clients send, the model is
        # built on the one it receives.
        declared = declarations(input_fn)
        if mode == Mode.TRAIN and global_batch is None and declared.seeded:
            self._train_probe = (input_fn, probe)
        batch_axes = declared.batch_axes
        feature_spec, build_shapes = {}, {}
        for name, s in features_spec.items():
            dims, axis = list(s.shape), batch_axes.get(name, 0)
            feature_spec[name] = (tuple(dims[:axis] + dims[axis + 1:]), s.dtype.name)
            build_shapes[name] = tuple(dims[:axis] + [None] + dims[axis + 1:])
        params = self.input_params(mode, global_batch=global_batch)
        params["feature_spec"] = dict(feature_spec)
        for key in ("input_context", "mode", "start_step"):
            params.pop(key, None)
        return build_state(self.model_fn, params, feature_spec, strategy=self.strategy,
                           precision=self.config.precision, checkpoint_dir=checkpointing.checkpoint_dir(self.model_dir),
                           keep_checkpoint_max=self.config.keep_checkpoint_max, build_shapes=build_shapes,
                           to_model_layout=declared.to_model_layout)

    @property
    def global_step(self) -> int:
        return self._state.step if self._state is not None else self._latest_step_on_disk()

    def _latest_step_on_disk(self) -> int:
        latest = self.latest_checkpoint()
        return int(latest.rsplit("-", 1)[-1]) if latest else 0

    def latest_checkpoint(self) -> str | None:
        import tensorflow as tf

        return tf.train.latest_checkpoint(self.model_dir)

    def restore_checkpoint(self, checkpoint_path: str) -> None:
        """Loads these weights into the built model (evaluate or export another checkpoint)."""
        self.state.checkpoint.restore(checkpoint_path).expect_partial()

    # ------------------------------------------------------------------ train
    def call_model(self, features: Mapping[str, Any], training: bool):
        """Calls the model on a features dict (`spec.model_inputs` decides tensor or dict)."""
        return replica_steps.call_model(self.state, features, training)

    def make_forward_backward(self, global_batch: int):
        """`forward_backward(features, labels) -> (per_example, grads, reports)` of one replica
        (shared by the device loop and the host-side replay in `tpuestimator.debug`)."""
        return replica_steps.make_forward_backward(self.state, global_batch, precision=self.config.precision,
                                           jit_compile=self.config.jit_compile)

    @property
    def trainer(self) -> Trainer:
        """The `tpuestimator.core.trainer.Trainer`: the training input and its device loops."""
        if self._trainer is None:
            self._trainer = Trainer(strategy=self.strategy, state=self.state, config=self.config,
                                    workers=len(self.device_info.devices))
        return self._trainer

    def swap_train_loop(self, loop=None):
        """Replaces the train loop's `tf.function` from the next loop on; returns the old one.

        With `loop=None` a fresh one is built, so the next loop traces anew: op callbacks such
        as Debugger V2 dumps (`tpuestimator.debug.DumpHook`) instrument graphs at trace time.
        Pass the returned function back to restore the original (no retrace). Call it from a
        hook (`before_loop`/`after_loop`) while `train()` runs.
        """
        return self.trainer.swap_loop(loop)

    def train(self, input_fn, steps: int | None = None, max_steps: int | None = None,
              hooks: Iterable[Any] = (), *, save_final_checkpoint: bool = True) -> Estimator:
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
        start = self.build(input_fn, Mode.TRAIN).step
        target = start + steps if steps is not None else max_steps
        if target is not None and start >= target:
            logger.info("global step %d already reached max_steps=%d; nothing to train", start, target)
            return self
        hook_list = self.hook_list(hooks)
        self.stop_training = hook_list.stop_training
        if self.stop_training:  # a hook asked to stop before this call (e.g. early stopping after an eval)
            return self
        controller = self.train_controller(input_fn, hook_list)
        with controller.session(target):  # the hooks' begin, then end (or on_exception)
            result = controller.train_to(target, save_final_checkpoint=save_final_checkpoint)
        self.stop_training, self.last_train_logs = result.stop_requested, result.logs
        return self

    def hook_list(self, hooks: Iterable[Any]) -> HookList:
        """`hooks` as a `HookList` whose hooks know this Estimator (`Hook.estimator`)."""
        hook_list = hooks if isinstance(hooks, HookList) else HookList(hooks)
        hook_list.set_estimator(self)
        return hook_list

    def train_controller(self, input_fn, hooks: HookList) -> TrainController:
        """The `TrainController` of one `train` (or `train_and_evaluate`) call: the trainer set
        to read `input_fn` (the model built first), `hooks` bracketed once by its session."""
        state = self.build(input_fn, Mode.TRAIN)
        probe, self._train_probe = self._train_probe, None
        # the probe was built for step 0 (before the checkpoint was restored): a resumed
        # training builds its input positioned at its step
        built = probe[1] if probe is not None and probe[0] is input_fn and state.step == 0 else None
        self.trainer.use_input(input_fn, params=self.input_params(Mode.TRAIN),
                               input_on_host=input_on_host(self.strategy), built=built)
        return TrainController(trainer=self.trainer, state=state, hooks=hooks, config=self.config,
                               info={"model_dir": self.model_dir, "num_replicas": self.num_replicas,
                                     "global_batch_size": self.config.train_batch_size})

    def save_checkpoint(self) -> str:
        """Saves a checkpoint at the current global step; returns its path."""
        return checkpointing.save(self.state, asynchronous=self.config.async_checkpoint)

    # ------------------------------------------------------------------ eval / predict
    @property
    def evaluator(self) -> Evaluator:
        """The `tpuestimator.core.evaluator.Evaluator`: the eval/predict input and device functions."""
        if self._evaluator is None:
            self._evaluator = Evaluator(strategy=self.strategy, state=self.state, device_info=self.device_info,
                                        input_on_host=input_on_host(self.strategy))
        return self._evaluator

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
        self.build(input_fn, Mode.EVAL)
        if checkpoint_path:
            self.restore_checkpoint(checkpoint_path)
        hook_list = self.hook_list(hooks)
        hook_list.before_eval(self.state.step)
        results = self.evaluator.evaluate(input_fn, self.input_params(Mode.EVAL), steps)
        hook_list.after_eval(results["global_step"], results)
        logger.debug("eval at step %d: %s", results["global_step"], results)
        return results

    def predict(self, input_fn, *, yield_single_examples: bool = True) -> Iterator[dict]:
        """Yields one dict of predictions per real example (padding removed), in input order.

        Under `multi_worker` every worker reads its share of each batch and the shares are
        gathered: each worker yields ALL the predictions, in input order (every worker must
        call `predict` with the same input, as for `evaluate`).

        With `class_names` in the model spec, each dict holds `class` (the class string),
        as TPUEstimator's flowers example predicted.
        """
        import numpy as np

        spec = self.build(input_fn, Mode.PREDICT).spec
        names = np.asarray(spec.class_names) if spec.class_names else None
        for local in self.evaluator.predict_batches(input_fn, self.input_params(Mode.PREDICT)):
            if names is not None and "class_id" in local:
                local["class"] = names[local["class_id"]]
            if yield_single_examples:
                keys = list(local)
                for row in zip(*(local[k] for k in keys)):  # row i of every array, as `array[i]` gives it
                    yield dict(zip(keys, row))
            else:
                yield local

    # ------------------------------------------------------------------ export
    def serving_module(self, serving_inputs=None):
        """A `tf.Module` holding the model and its serving functions (`serving.serving_module`)."""
        return serving_module(self.spec, self.state.feature_spec, serving_inputs,
                              to_model_layout=self.state.to_model_layout)

    def export_saved_model(self, export_dir_base: str, *, version: int | None = None,
                           checkpoint_path: str | None = None, serving_inputs=None,
                           assets_extra: Mapping[str, Any] | None = None) -> str:
        """Writes a versioned SavedModel for TF Serving, `<export_dir_base>/<version>/`; returns its path.

        The version defaults to a timestamp in seconds (TF Serving serves the highest). The
        folder appears atomically: a crash mid-export leaves nothing behind. Signatures (all
        with a free batch dimension; outputs `probabilities`, `class_id`, `class` for the
        built-in classifiers): `features` (the decoded features), one per `serving_inputs`
        entry (name -> `serving.ServingInput`: raw inputs and their preprocessing), and
        `serving_default` (the `features` one unless `serving_inputs` names it). Jobs pass
        `serving.data_serving_inputs(data_section)`: tf.Example records and raw image bytes.
        `assets_extra` (file name -> JSON value) is written under `assets.extra/` before the
        folder appears, so the export is never seen without it.
        """
        if self._state is None:
            raise RuntimeError("Nothing to export: train, evaluate or predict first so the model is built "
                               "(or use tpuestimator.jobs.job.export_job(model_dir) to export from checkpoints).")
        if checkpoint_path:
            self.restore_checkpoint(checkpoint_path)
        return write_saved_model(self.serving_module(serving_inputs), export_dir_base, version=version,
                                 model_dir=self.model_dir, step=self.state.step, assets_extra=assets_extra)
