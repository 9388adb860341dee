"""The public training state: everything a built Estimator trains, evaluates and checkpoints.

`Estimator.state` is a `TrainingState` once the model is built (the first `train`,
`evaluate` or `predict`, or `Estimator.build`). Hooks, the debug tools and the checks read
the model, optimizer, global step, checkpoint manager and metrics here, never through the
Estimator's private attributes.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from tpuestimator.core.workarounds import atomic_optimizer_counters
from tpuestimator.errors import ConfigError, ModelFnError
from tpuestimator.spec import ModelSpec


@dataclasses.dataclass
class TrainingState:
    """A built model and what trains it.

    Attributes:
      spec: the `ModelSpec` the model function returned (with the optimizer built, wrapped in
        a `LossScaleOptimizer` under `mixed_float16`).
      model, optimizer: `spec.model` and `spec.optimizer`.
      global_step: the int64 `tf.Variable` counting training steps (checkpointed as `step`).
      checkpoint, manager: the `tf.train.Checkpoint` (model, optimizer, step, the model's
        random seed generators' state) and its
        `tf.train.CheckpointManager` in the model dir.
      feature_spec: {feature name: (shape without the batch, dtype name)} of the input, in the
        layout clients send (`[b, h, w, c]` images, also under `data.transpose_input`).
      to_model_layout: None, or `features -> features` the input function applied after
        batching (`data.transpose_input`); the export's signatures apply it too.
      train_metrics: {"loss": Mean, "report/<name>": Mean}, read and reset after each loop.
      eval_loss, eval_count: the evaluation's masked mean loss and example count.
      eval_metrics: {name: (keras Metric, None or fn(labels, outputs) -> values)}.
    """

    spec: ModelSpec
    optimizer: Any
    global_step: Any
    checkpoint: Any
    manager: Any
    feature_spec: dict
    train_metrics: dict
    eval_loss: Any
    eval_count: Any
    eval_metrics: dict
    to_model_layout: Any = None

    @property
    def model(self):
        return self.spec.model

    @property
    def step(self) -> int:
        """The global step as a Python int (one device read)."""
        return int(self.global_step.numpy())

    @property
    def report_names(self) -> list[str]:
        return list(self.spec.report)

    def latest_checkpoint(self) -> str | None:
        return self.manager.latest_checkpoint

    def sentinel_variables(self) -> list:
        """What the NaN/Inf sentinel checks: the trainable weights and the optimizer's state
        (e.g. Adam's moments, which can overflow while the weights stay finite), so that no
        checkpoint with a non-finite value is ever written."""
        return [*self.model.trainable_variables, *self.optimizer.variables]

    def eval_metric_objects(self) -> list:
        return [self.eval_loss, self.eval_count, *(m for m, _ in self.eval_metrics.values())]


def _refuse_sharded_weights(model) -> None:
    """`run.ps_partition` sharded a weight of an ordinary layer: Keras 3's optimizers cannot
    update a `tf.distribute.ShardedVariable` (TF 2.21, Keras 3: "ShardedVariable doesn't
    support being used as a reference" in the distributed update), and a checkpoint cannot save
    a Keras weight made of one, trainable or not (the saver asks it for a `device`), so say so
    before training starts. Embedding tables shard through
    `tpuestimator.models.embedding.sharded_embedding` (a layer that owns its shards)."""
    # by name: TensorFlow exports no public ShardedVariable class
    sharded = [(w.path, len(w.value.variables)) for w in model.weights
               if type(getattr(w, "value", None)).__name__ == "ShardedVariable"]
    if sharded:
        names = ", ".join(f"{path} ({n} shards)" for path, n in sharded)
        raise ConfigError("run.ps_partition", names,
                          "no sharding of this layer's weights: Keras 3's optimizers cannot update a sharded variable "
                          "nor its checkpoints save one; build embedding tables with tpuestimator.models.embedding.sharded_embedding "
                          "(shards the table itself), or raise min_shard_bytes above this weight's size, or set "
                          "run.ps_partition: null")


def random_state_variables(model) -> list:
    """The model's random seed generators' states (Keras `SeedGenerator`s of Dropout and
    other random layers), in the model's variable order."""
    return [v for v in model.non_trainable_variables if "seed_generator_state" in getattr(v, "path", v.name)]


def build_state(model_fn, params: dict, feature_spec: dict, *, strategy, precision: str, checkpoint_dir: str,
                keep_checkpoint_max: int, build_shapes: dict | None = None,
                to_model_layout: Any = None) -> TrainingState:
    """Calls the model function in the strategy's scope (under `precision`'s Keras policy) and
    builds the model, optimizer, global step, metrics and checkpoint manager around it.

    `build_shapes` (name -> shape with None for the batch, in the layout the model receives)
    defaults to `(None, *shape)` of `feature_spec`.

    Raises:
      ModelFnError: the model function returned something else than a `ModelSpec`, or a
        metric that is neither a Keras metric nor a callable.
    """
    import keras
    import tensorflow as tf

    previous_policy = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(precision)
    try:
        with strategy.scope():
            spec = model_fn(params)
            if not isinstance(spec, ModelSpec):
                raise ModelFnError(f"The model function must return a tpuestimator.ModelSpec. Received: {type(spec).__name__}")
            optimizer = spec.optimizer() if callable(spec.optimizer) and not hasattr(spec.optimizer, "apply_gradients") else spec.optimizer
            if precision == "mixed_float16" and not isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            if not spec.model.built:
                spec.model.build(build_shapes or {k: (None, *s) for k, (s, _) in feature_spec.items()})
            _refuse_sharded_weights(spec.model)
            optimizer.build(spec.model.trainable_variables)
            atomic_optimizer_counters(optimizer)  # parameter servers: no lost step
            step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step",
                               aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
            train_metrics = {"loss": keras.metrics.Mean(name="loss"),
                             **{f"report/{name}": keras.metrics.Mean(name=name) for name in spec.report}}
            eval_loss = keras.metrics.Mean(name="loss")
            eval_metrics = {}
            for name, metric in spec.metrics.items():
                if isinstance(metric, keras.metrics.Metric):
                    eval_metrics[name] = (metric, None)
                elif callable(metric):
                    eval_metrics[name] = (keras.metrics.Mean(name=name), metric)
                else:
                    raise ModelFnError(f"ModelSpec.metrics['{name}'] must be a keras.metrics.Metric or a callable. Received: {metric!r}")
            eval_count = keras.metrics.Sum(name="num_examples")
    finally:
        keras.mixed_precision.set_global_policy(previous_policy)
    # Keras keeps the state of its layers' random seed generators (Dropout, ...) out of the
    # model's checkpoint: tracked here, a resumed run draws the dropout masks an uninterrupted
    # run would (exact resume, tpuestimator.core.input_position).
    checkpoint = tf.train.Checkpoint(model=spec.model, optimizer=optimizer, step=step,
                                     random_state=random_state_variables(spec.model))
    manager = tf.train.CheckpointManager(checkpoint, checkpoint_dir, max_to_keep=keep_checkpoint_max, step_counter=step)
    return TrainingState(spec=dataclasses.replace(spec, optimizer=optimizer), optimizer=optimizer,
                         global_step=step, checkpoint=checkpoint, manager=manager, feature_spec=feature_spec,
                         train_metrics=train_metrics, eval_loss=eval_loss, eval_count=eval_count,
                         eval_metrics=eval_metrics, to_model_layout=to_model_layout)
