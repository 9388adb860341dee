"""Replaying training steps on the host, outside the device loop.

Used twice:

- by the NaN/Inf sentinel after a loop went non-finite (`find_first_nonfinite`): a fresh,
  non-distributed copy of the model restores the last good checkpoint and replays the steps
  since, from the same input position, through the same input function with the same seed,
  checking each step's loss, gradients and updated weights; it stops at the first non-finite
  step and keeps its batch and the state just before it. Normal runs pay nothing for this:
  nothing is recorded while training; the replay only runs after a failure.
- by `tpuestimator debug replay BUNDLE` (`replay_bundle`): restores the bundle's checkpoint
  and runs the bundled step once with `tf.debugging.enable_check_numerics()`, which names the
  first op that produced NaN/Inf and the source line that created it.

A step is replayed exactly as the device loop runs it: each replica's batch goes through the
same `forward_backward` (loss averaged over the GLOBAL batch), the replicas' gradients are
summed (the all-reduce) and applied once. Models with random ops (dropout) draw different
random numbers on the host, so a replay of such a model may differ from the device run.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

from tpuestimator.core.checkpointing import checkpoint_path_step
from tpuestimator.core.input_position import train_dataset
from tpuestimator.core.tracing import device_function
from tpuestimator.spec import Mode, split_element

logger = logging.getLogger(__name__)


def _replay_estimator_class():
    from tpuestimator.core.estimator import Estimator

    class ReplayEstimator(Estimator):
        """An Estimator on one CPU replica that builds the model with the ORIGINAL per-replica
        batch and replica count (a model function may depend on them)."""

        def __init__(self, *args, replica_batch: int, num_replicas: int, **kwargs):
            super().__init__(*args, **kwargs)
            self._replica_batch = replica_batch
            self._orig_replicas = num_replicas

        def input_params(self, mode, *, global_batch=None, input_context=None):
            params = super().input_params(mode, global_batch=global_batch, input_context=input_context)
            params.update(batch_size=self._replica_batch, global_batch_size=self._replica_batch * self._orig_replicas,
                          num_replicas=self._orig_replicas)
            return params

    return ReplayEstimator


@dataclasses.dataclass
class StepCheck:
    """What one replayed step produced."""

    step: int
    loss: float
    loss_finite: bool
    bad_gradients: list[str]
    bad_weights: list[str]

    @property
    def finite(self) -> bool:
        return self.loss_finite and not self.bad_gradients and not self.bad_weights

    def what(self) -> str:
        if not self.loss_finite:
            return "loss"
        if self.bad_gradients:
            return "gradients"
        if self.bad_weights:
            return "weights"
        return "none"


class HostReplay:
    """A non-distributed copy of a model for replaying training steps on the host CPU.

    Args:
      model_fn: the model function.
      params: the model function's params (without the Estimator's additions).
      replica_batch: the per-replica batch of the original run.
      num_replicas: the original replica count (its gradients are summed per step).
      probe_input_fn: an input function whose element spec gives the feature spec.
      precision, seed, warm_start_from: as in the original RunConfig.
    """

    def __init__(self, model_fn: Callable, params: Mapping[str, Any], *, replica_batch: int, num_replicas: int,
                 probe_input_fn: Callable, precision: str = "float32", seed: int | None = 42,
                 warm_start_from: str | None = None):
        import tensorflow as tf

        from tpuestimator.core.estimator import RunConfig

        self.replica_batch = int(replica_batch)
        self.num_replicas = int(num_replicas)
        self.global_batch = self.replica_batch * self.num_replicas
        self._tmp = tempfile.mkdtemp(prefix="tpue-replay-")
        config = RunConfig(model_dir=self._tmp, train_batch_size=self.replica_batch,
                           eval_batch_size=self.replica_batch, predict_batch_size=self.replica_batch,
                           iterations_per_loop=1, save_checkpoints_steps=None, strategy="cpu", precision=precision,
                           seed=seed, nan_sentinel=False, warm_start_from=warm_start_from)
        cls = _replay_estimator_class()
        self.estimator = cls(model_fn, config, params, replica_batch=self.replica_batch,
                             num_replicas=self.num_replicas, strategy=tf.distribute.OneDeviceStrategy("/cpu:0"))
        state = self.estimator.build(probe_input_fn, Mode.TRAIN, global_batch=self.replica_batch)
        self.model = state.model
        self.optimizer = state.optimizer
        self.loss_scaled = precision == "mixed_float16"
        self._state = [*self.model.variables, *self.optimizer.variables, state.global_step]
        self._shadow = None
        self._step_fn = None

    # ------------------------------------------------------------------ state
    def _checkpoint(self):
        """model + optimizer + step, as the Estimator checkpoints them (no save counter)."""
        import tensorflow as tf

        return tf.train.Checkpoint(model=self.model, optimizer=self.optimizer, step=self.estimator.state.global_step)

    def restore(self, checkpoint: str | None) -> int:
        """Restores model, optimizer and step from `checkpoint` (None: keep the initial state)."""
        if checkpoint:
            self._checkpoint().restore(checkpoint).assert_existing_objects_matched()
        return self.estimator.state.step

    def snapshot(self) -> None:
        """Copies the whole training state aside (to return to it with `rollback`)."""
        import tensorflow as tf

        if self._shadow is None:
            with self.estimator.strategy.scope():
                self._shadow = [tf.Variable(tf.convert_to_tensor(v), trainable=False) for v in self._state]
        for s, v in zip(self._shadow, self._state):
            s.assign(tf.convert_to_tensor(v))

    def rollback(self) -> None:
        for s, v in zip(self._shadow, self._state):
            v.assign(s.read_value())

    def save(self, prefix: str) -> str:
        """Writes the current state (model, optimizer, step) as a checkpoint; returns its path."""
        checkpoint = self._checkpoint()
        _ = checkpoint.save_counter  # created, so the file matches what restore() builds
        return checkpoint.write(prefix)

    # ------------------------------------------------------------------ steps
    def _build_step(self):
        import tensorflow as tf

        est = self.estimator
        forward_backward = est.make_forward_backward(self.global_batch)
        variables = self.model.trainable_variables
        names = [v.path if hasattr(v, "path") else v.name for v in variables]
        self.variable_names = names
        # After the update: the weights and the optimizer's float state (the sentinel checks both).
        state = [*variables, *[v for v in self.optimizer.variables if "float" in str(v.dtype)]]
        self.state_names = [v.path if hasattr(v, "path") else v.name for v in state]
        check_grads = not self.loss_scaled  # a loss-scaled optimizer skips non-finite gradients by design

        def finite(x):
            if x is None:
                return tf.constant(True)
            if isinstance(x, tf.IndexedSlices):
                x = x.values
            return tf.reduce_all(tf.math.is_finite(tf.cast(x, tf.float32)))

        def replica_fn(batches):
            per_examples, total = [], None
            for features, labels in batches:
                per_example, grads, _ = forward_backward(features, labels)
                per_examples.append(per_example)
                if total is None:
                    total = list(grads)
                else:
                    total = [a if b is None else (b if a is None else tf.convert_to_tensor(a) + tf.convert_to_tensor(b))
                             for a, b in zip(total, grads)]
            per_example = tf.concat(per_examples, 0)
            # The loss the step differentiates is the sum over the global batch / its size: it
            # can overflow to Inf while every per-example loss is finite.
            loss = tf.reduce_sum(per_example) / self.global_batch
            loss_ok = tf.logical_and(tf.reduce_all(tf.math.is_finite(per_example)), tf.math.is_finite(loss))
            grads_ok = tf.stack([finite(g) if check_grads else tf.constant(True) for g in total])
            self.optimizer.apply_gradients(zip(total, variables))
            weights_ok = tf.stack([finite(v) for v in state])
            return loss, loss_ok, grads_ok, weights_ok

        def step(batches):
            return est.strategy.run(replica_fn, args=(batches,))
        return device_function(step)

    def rename(self, variable_names: list[str], state_names: list[str]) -> None:
        """Reports variables under the original model's names (a second model instance gets
        suffixed layer names)."""
        if self._step_fn is None:
            self._step_fn = self._build_step()
        if len(variable_names) == len(self.variable_names):
            self.variable_names = list(variable_names)
        if len(state_names) == len(self.state_names):
            self.state_names = list(state_names)

    def run_step(self, step: int, batches) -> StepCheck:
        """Runs one training step on `batches` (one (features, labels) per original replica)."""
        if self._step_fn is None:
            self._step_fn = self._build_step()
        loss, loss_ok, grads_ok, weights_ok = self._step_fn(tuple(batches))
        self.estimator.state.global_step.assign_add(1)
        grads_ok, weights_ok = grads_ok.numpy().tolist(), weights_ok.numpy().tolist()
        return StepCheck(step=step, loss=float(loss), loss_finite=bool(loss_ok),
                         bad_gradients=[n for n, ok in zip(self.variable_names, grads_ok) if not ok],
                         bad_weights=[n for n, ok in zip(self.state_names, weights_ok) if not ok])

    def close(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)


# ---------------------------------------------------------------------- sentinel search
@dataclasses.dataclass
class Finding:
    """The result of `find_first_nonfinite`."""

    reproduced: bool
    step: int | None = None  # the 1-based step that went non-finite (global step after it)
    check: StepCheck | None = None
    batches: list | None = None  # [(features, labels)] per replica, numpy
    checkpoint: str | None = None  # state just before `step`, written into the bundle
    start_checkpoint: str | None = None
    replayed_steps: int = 0
    note: str = ""


def find_first_nonfinite(estimator, *, fail_step: int, bundle_checkpoint_prefix: str,
                         max_steps: int = 20_000) -> Finding:
    """Replays `estimator`'s training on the host from its last good checkpoint up to
    `fail_step` and returns the first step whose loss, gradients or weights went non-finite.

    The input is rebuilt with the parameters the training iterator was created with (same
    seed, same `start_step`), skipped to the checkpoint's position, and read without
    distribution: global step k consumed the per-replica batches k*R .. k*R+R-1 of the
    worker's input (R local replicas). Under multi-worker training only this worker's shard
    is replayed.
    """
    import numpy as np

    train_input = estimator.train_input
    if train_input is None:
        return Finding(False, note="no training input to replay")
    input_fn = train_input.input_fn
    origin = train_input.origin
    latest = estimator.state.latest_checkpoint()
    start = checkpoint_path_step(latest)
    if latest is None:
        if origin != 0:
            return Finding(False, note=f"no checkpoint to start from (the input started at step {origin})")
        start = 0
    if start < origin:
        return Finding(False, start_checkpoint=latest,
                       note=f"the last checkpoint (step {start}) predates this input (started at step {origin})")
    if fail_step - start > max_steps:
        return Finding(False, start_checkpoint=latest,
                       note=f"{fail_step - start} steps since the last checkpoint exceed the replay limit of {max_steps}; "
                            "save checkpoints more often (train.save_checkpoints_steps) to get a repro bundle")
    replicas = estimator.num_replicas
    replica_batch = estimator.per_replica_batch(estimator.config.train_batch_size, "train.batch_size")
    params = estimator.input_params(Mode.TRAIN)
    params["start_step"] = origin
    params["input_context"] = None
    replay = HostReplay(estimator.model_fn, estimator.params, replica_batch=replica_batch, num_replicas=replicas,
                        probe_input_fn=input_fn, precision=estimator.config.precision, seed=estimator.config.seed,
                        warm_start_from=estimator.config.warm_start_from if latest is None else None)
    original = [getattr(v, "path", v.name) for v in estimator.spec.model.trainable_variables]
    original_state = [getattr(v, "path", v.name) for v in
                      [*estimator.spec.model.trainable_variables,
                       *[v for v in estimator.state.optimizer.variables if "float" in str(v.dtype)]]]
    try:
        replay.restore(latest)
        replay.rename(original, original_state)
        dataset = train_dataset(input_fn, params).skip((start - origin) * replicas)
        iterator = iter(dataset)
        finding = Finding(False, start_checkpoint=latest)
        for step in range(start + 1, fail_step + 1):
            batches = []
            try:
                for _ in range(replicas):
                    batches.append(split_element(next(iterator)))
            except StopIteration:
                finding.note = f"the input ended at step {step} during the replay"
                return finding
            replay.snapshot()
            check = replay.run_step(step, batches)
            finding.replayed_steps += 1
            if not check.finite:
                replay.rollback()
                os.makedirs(os.path.dirname(bundle_checkpoint_prefix), exist_ok=True)
                path = replay.save(bundle_checkpoint_prefix)
                as_numpy = [({k: np.asarray(v) for k, v in f.items()}, None if y is None else np.asarray(y))
                            for f, y in batches]
                return Finding(True, step=step, check=check, batches=as_numpy, checkpoint=path,
                               start_checkpoint=latest, replayed_steps=finding.replayed_steps)
        finding.note = (f"the host replay of steps {start + 1}..{fail_step} stayed finite: the device run differs "
                        "numerically (replica count, XLA, random ops such as dropout)")
        return finding
    finally:
        replay.close()


# ---------------------------------------------------------------------- bundle replay
def replay_bundle(bundle_dir: str, *, model_fn: Callable | None = None, check_numerics: bool = True) -> dict:
    """Re-runs a bundle's offending step from its checkpoint with check-numerics mode on.

    Args:
      bundle_dir: the bundle (or the report folder holding `bundle/`).
      model_fn: the model function, when the bundle could not record an importable one.
      check_numerics: False to run the step plainly (reports what went non-finite).

    Returns:
      dict with `step`, `reproduced`, `what` (loss/gradients/weights/op), `op` (the parsed
      check-numerics error: op_name, op_type, kind, source, user_source; None when the
      step stayed finite) and `message` (a one-line summary).
    """
    import tensorflow as tf

    from tpuestimator.debug import bundle as bundle_io
    from tpuestimator.debug.numerics import describe, parse_check_numerics_error
    from tpuestimator.errors import ConfigError
    from tpuestimator.models import resolve_model_fn

    info = bundle_io.read_json(bundle_dir)
    root = info["_dir"]
    if model_fn is None:
        ref = info.get("model")
        if not ref:
            raise ConfigError("BUNDLE", root, "a bundle whose model function can be imported (this one was trained "
                              "with an in-memory model function: pass model_fn= to replay_bundle)")
        model_fn = resolve_model_fn(ref)
    if not info.get("checkpoint"):
        raise ConfigError("BUNDLE", root, "a bundle holding the offending step (this report could not reproduce the "
                          "failure on the host; see report.txt)")
    batch_path = os.path.join(root, bundle_io.BATCH_FILE)
    feature_dtypes = {k: v[1] for k, v in (info.get("feature_spec") or {}).items()}
    records = bundle_io.read_batches(batch_path, feature_dtypes, info.get("labels_dtype"))
    if not records:
        raise ConfigError("BUNDLE", root, f"a bundle with a batch in {bundle_io.BATCH_FILE}")
    step, features, labels = records[0]
    replicas = int(info["num_replicas"])
    replica_batch = int(info["replica_batch"])

    def split(x):
        return [x[i * replica_batch:(i + 1) * replica_batch] for i in range(replicas)]

    per_feature = {k: split(v) for k, v in features.items()}
    per_labels = split(labels) if labels is not None else [None] * replicas
    batches = [({k: per_feature[k][i] for k in features}, per_labels[i]) for i in range(replicas)]

    def probe_input_fn(params):
        f, y = batches[0]
        return tf.data.Dataset.from_tensors((f, y) if y is not None else f)

    replay = HostReplay(model_fn, info.get("params") or {}, replica_batch=replica_batch, num_replicas=replicas,
                        probe_input_fn=probe_input_fn, precision=info.get("precision", "float32"),
                        seed=info.get("seed"))
    result: dict[str, Any] = {"step": step, "bundle": root, "reproduced": False, "what": None, "op": None}
    try:
        replay.restore(os.path.join(root, info["checkpoint"]))
        if check_numerics:
            tf.debugging.enable_check_numerics()
        try:
            check = replay.run_step(step, batches)
        except Exception as exc:  # noqa: BLE001 - only a check-numerics error is an answer
            found = parse_check_numerics_error(str(exc))
            if found is None:
                raise
            result.update(reproduced=True, what="op", op=found,
                          message=f"step {step}: {describe(found)}")
            return result
        finally:
            if check_numerics:
                tf.debugging.disable_check_numerics()
        result.update(reproduced=not check.finite, what=check.what(), loss=check.loss,
                      bad_gradients=check.bad_gradients, bad_weights=check.bad_weights)
        result["message"] = (f"step {step}: the {check.what()} went non-finite" if not check.finite else
                             f"step {step} stayed finite when replayed on the host: the failure did not reproduce")
        return result
    finally:
        replay.close()
