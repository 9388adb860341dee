"""Replica steps: what one replica does with one batch, in training, evaluation and prediction.

The device loops (`tpuestimator.core.loops`) run these inside `strategy.run`; the NaN/Inf replay
(`tpuestimator.debug.replay`) runs the same `forward_backward` on the host. Each takes a
`TrainingState` and reads an input element as the model-function contract says
(`spec.split_element`, `spec.model_inputs`). In Orbit's terms this module is the trainer's
and evaluator's step; the outer loop is `tpuestimator.core.controller`.
"""
from __future__ import annotations

from tpuestimator.core.batching import MASK_KEY
from tpuestimator.core.tracing import device_function
from tpuestimator.spec import model_inputs, split_element
from tpuestimator.system.graph_code import as_written, users_graph_code


@as_written
def call_model(state, features, training: bool):
    """The model on a features dict (the tensor alone for a one-feature dict)."""
    return state.model(model_inputs(features), training=training)


def make_forward_backward(state, global_batch: int, *, precision: str = "float32", jit_compile: bool = False):
    """`forward_backward(features, labels) -> (per_example, grads, reports)` of one replica.

    The loss is averaged over the GLOBAL batch (`tf.nn.compute_average_loss`), so summing the
    replicas' gradients gives the global mean's gradient; regularisation losses are scaled by
    the replica count; under `mixed_float16` the loss is scaled for the `LossScaleOptimizer`.
    """
    import tensorflow as tf

    spec, optimizer, model = state.spec, state.optimizer, state.model
    loss_scaled = hasattr(optimizer, "scale_loss") and precision == "mixed_float16"

    @as_written  # ours; the spec's functions keep AutoGraph (users_graph_code)
    def forward_backward(features, labels):
        with tf.GradientTape() as tape:
            outputs = call_model(state, features, training=True)
            per_example = tf.cast(users_graph_code(spec.loss)(labels, outputs), tf.float32)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            if model.losses:
                loss += tf.nn.scale_regularization_loss(tf.add_n([tf.cast(reg, tf.float32) for reg in model.losses]))
            to_differentiate = optimizer.scale_loss(loss) if loss_scaled else loss
        grads = tape.gradient(to_differentiate, model.trainable_variables)
        reports = {name: users_graph_code(fn)(labels, outputs) for name, fn in spec.report.items()}
        return per_example, grads, reports

    if jit_compile:
        # XLA compiles forward and backward (the TPU compiler's view of the model); the
        # cross-replica all-reduce inside apply_gradients stays outside the cluster.
        forward_backward = device_function(forward_backward, jit_compile=True)
    return forward_backward


def make_train_step(state, forward_backward, *, per_step_values: bool = False):
    """The replica step of the train loop: forward, backward, apply, update the loop's metrics.
    With `per_step_values` it also returns this replica's mean loss and report values (for
    hooks that declare `wants_per_step_values`; off by default)."""
    import tensorflow as tf

    model, optimizer, metrics = state.model, state.optimizer, state.train_metrics

    @as_written
    def replica_step(*element):
        features, labels = split_element(element if len(element) > 1 else element[0])
        per_example, grads, reports = forward_backward(features, labels)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        add_to_metric(metrics["loss"], per_example)
        for name, value in reports.items():
            add_to_metric(metrics[f"report/{name}"], value)
        if per_step_values:
            return {"loss": tf.reduce_mean(per_example),
                    **{name: tf.reduce_mean(tf.cast(value, tf.float32)) for name, value in reports.items()}}
    return replica_step


@as_written
def add_to_metric(metric, *args):
    """`metric.update_state(*args)` made of atomic additions, for metrics whose update adds to
    every variable (`Mean`, `Sum`: the train metrics).

    Keras 3's `Variable.assign_add` is `assign(self + value)`: a read, then a write. Under
    parameter servers the metrics live on a ps and the workers update them concurrently, so a
    worker's write could overwrite another's addition made between its read and its write
    (test_cluster_ps.py measured a third of the training-loss metric's examples lost
    with 2 workers). Here Keras computes the update from zeros (`stateless_update_state`), which
    is the amount each variable grows by, and the underlying `tf.Variable` (Keras's public
    `Variable.value`) adds it in one `assign_add` op, which the ps applies under the variable's
    lock. Elsewhere it is the same update in one op instead of two. Remove when Keras's
    TensorFlow backend adds with `tf.Variable.assign_add`.
    """
    import tensorflow as tf

    variables = metric.variables
    increments = metric.stateless_update_state([tf.zeros(v.shape, v.dtype) for v in variables], *args)
    return [v.value.assign_add(increment) for v, increment in zip(variables, increments)]


def make_eval_step(state, *, carry_totals: bool = False, to_model_layout=None):
    """The replica step of evaluation: masked loss, example count and the spec's metrics
    (padded batches carry `MASK_KEY`; unpadded ones count every example).

    Args:
      carry_totals: return (loss sum, example count) of the batch for the loop to add up
        (one replica: two tensor additions instead of two metric updates per batch), instead
        of updating `state.eval_loss` and `state.eval_count`.
      to_model_layout: None, or the input function's `features -> features` applied here, on
        the device, to batches padded and split in the client layout
        (`batching.batch_axis_first`: `data.transpose_input` with several replicas).
    """
    import tensorflow as tf

    spec = state.spec

    @as_written  # ours; the spec's functions and metrics keep AutoGraph (users_graph_code)
    def replica_step(*element):
        features, labels = split_element(element if len(element) > 1 else element[0])
        mask = features.pop(MASK_KEY, None)
        if to_model_layout is not None:
            features = users_graph_code(to_model_layout)(features)
        outputs = call_model(state, features, training=False)
        per_example = tf.cast(users_graph_code(spec.loss)(labels, outputs), tf.float32)
        count = tf.reduce_sum(mask) if mask is not None else tf.cast(tf.shape(per_example)[0], tf.float32)
        totals = None
        if carry_totals:
            totals = (tf.reduce_sum(per_example * mask if mask is not None else per_example), count)
        else:
            state.eval_loss.update_state(per_example, sample_weight=mask)
            state.eval_count.update_state(count)
        for metric, fn in state.eval_metrics.values():
            if fn is None:
                users_graph_code(metric.update_state)(labels, outputs, sample_weight=mask)
            else:
                users_graph_code(metric.update_state)(users_graph_code(fn)(labels, outputs), sample_weight=mask)
        return totals
    return replica_step


def make_predict_replica_step(state, *, to_model_layout=None):
    """The replica step of prediction: the spec's predictions (or the raw outputs), with the
    padding mask passed through when the batch has one (`to_model_layout`: as in
    `make_eval_step`)."""
    spec = state.spec

    def replica_step(*element):
        features, _ = split_element(element if len(element) > 1 else element[0])
        mask = features.pop(MASK_KEY, None)
        if to_model_layout is not None:
            features = to_model_layout(features)
        outputs = call_model(state, features, training=False)
        preds = dict(spec.predictions(outputs)) if spec.predictions else {"outputs": outputs}
        if mask is not None:
            preds[MASK_KEY] = mask
        return preds
    return replica_step
