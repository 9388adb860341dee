"""Heads of the canned table models: classification (multi-class: softmax over `num_classes`
logits; binary: ONE logit z, as the premade Estimators' binary head, turned into the logits
[0, z] so that the softmax is the sigmoid of z and everything after the model, from the loss
to the exports, sees two classes) and regression (one float output; loss `mse` or `huber`; metrics MAE,
RMSE, R²), each as a `ModelSpec` around a Keras model.

A regressor learns the STANDARDIZED label, `(y - mean) / std` with the training rows' mean and
std (`CannedParams.label_stats`, from the table's manifest): its last layer (`LabelScale`) turns that
back into the label's units, so predictions, exports, MAE, RMSE and R² are in the label's units
while the weights start where the answer is (the mean) and move on the label's scale whatever
it is (a label of mean 65 and sd 3.5 trains like one of mean 0 and sd 1). The loss is the
squared (Huber) error divided by the variance: the loss of the standardized label (Huber's
`huber_delta` stays in the label's units). `params.standardize_label: false` turns it off.

Each function takes the model's typed params (`models.params.CannedParams`), parsed once by the
model function.
"""
from __future__ import annotations

from tpuestimator.models._layers import accuracy_report, classifier_loss
from tpuestimator.models.params import CannedParams
from tpuestimator.spec import ModelSpec, classification_predictions
from tpuestimator.system.graph_code import as_written


def label_scale(params: CannedParams) -> tuple[float, float]:
    """(mean, std) of the regression label the model learns standardized; (0, 1) without
    `label_stats` or with `standardize_label: false`."""
    stats = params.label_stats
    if stats is None or not params.standardize_label:
        return 0.0, 1.0
    return stats.mean, stats.std


def regression_loss(params: CannedParams):
    """Per-example loss `(labels [b], outputs [b, 1]) -> [b]`: squared error, or Huber (`huber_delta`),
    divided by the label's variance (`label_scale`)."""
    import keras

    kind = params.loss
    delta = float(params.huber_delta)
    inverse_variance = 1.0 / label_scale(params)[1] ** 2

    def loss(labels, outputs):
        error = keras.ops.reshape(keras.ops.cast(labels, "float32"), (-1,)) - \
            keras.ops.reshape(keras.ops.cast(outputs, "float32"), (-1,))
        if kind == "mse":
            return keras.ops.square(error) * inverse_variance
        absolute = keras.ops.abs(error)
        quadratic = keras.ops.minimum(absolute, delta)
        return (0.5 * keras.ops.square(quadratic) + delta * (absolute - quadratic)) * inverse_variance

    return as_written(loss)


def regression_metrics() -> dict:
    """MAE (a mean of per-example values), RMSE and R² (Keras metrics over [b, 1] columns)."""
    import keras

    def column(x):
        return keras.ops.reshape(keras.ops.cast(x, "float32"), (-1, 1))

    class _RootMeanSquaredError(keras.metrics.RootMeanSquaredError):
        @as_written
        def update_state(self, y_true, y_pred, sample_weight=None):
            return super().update_state(column(y_true), column(y_pred),
                                        None if sample_weight is None else column(sample_weight))

    class _R2Score(keras.metrics.R2Score):
        @as_written
        def update_state(self, y_true, y_pred, sample_weight=None):
            return super().update_state(column(y_true), column(y_pred),
                                        None if sample_weight is None else column(sample_weight))

    def mae(labels, outputs):
        return keras.ops.abs(keras.ops.reshape(keras.ops.cast(labels, "float32"), (-1,))
                             - keras.ops.reshape(keras.ops.cast(outputs, "float32"), (-1,)))

    return {"mae": as_written(mae), "rmse": _RootMeanSquaredError(name="rmse"), "r2": _R2Score(name="r2")}


def regression_predictions(outputs) -> dict:
    """`prediction` [b]: the predicted number."""
    import tensorflow as tf

    return {"prediction": tf.reshape(tf.cast(outputs, tf.float32), [-1])}


def with_label_scale(model, mean: float, std: float):
    """`model` with a last layer `outputs * std + mean` (no weights: the checkpoint is the same)."""
    import keras

    if (mean, std) == (0.0, 1.0):
        return model

    class LabelScale(keras.layers.Layer):
        def call(self, x):
            return x * std + mean

    outputs = LabelScale(name="label_scale", dtype="float32")(model.output)
    return keras.Model(model.input, outputs, name=model.name)


def with_binary_logits(model):
    """`model` (one logit z per example) with a last layer giving the two-class logits [0, z]
    (no weights: softmax([0, z])[1] = sigmoid(z))."""
    import keras

    class BinaryLogits(keras.layers.Layer):
        def call(self, z):
            z = keras.ops.cast(keras.ops.reshape(z, (-1, 1)), "float32")
            return keras.ops.concatenate([keras.ops.zeros_like(z), z], axis=-1)

    outputs = BinaryLogits(name="binary_logits", dtype="float32")(model.output)
    return keras.Model(model.input, outputs, name=model.name)


def head_spec(params: CannedParams, model, optimizer, *, serving_inputs=None, serving_preprocess=None) -> ModelSpec:
    """The `ModelSpec` of a canned model whose Keras `model` returns `params.units()` values
    (its outputs: the prediction in the label's units, or `num_classes` logits)."""
    if params.is_regression:
        model = with_label_scale(model, *label_scale(params))
        return ModelSpec(model=model, loss=regression_loss(params), optimizer=optimizer,
                         metrics=regression_metrics(), predictions=as_written(regression_predictions),
                         serving_inputs=serving_inputs, serving_preprocess=serving_preprocess)
    import keras

    if params.classes() == 2:
        model = with_binary_logits(model)
    return ModelSpec(model=model, loss=classifier_loss(), optimizer=optimizer,
                     metrics={"accuracy": keras.metrics.SparseCategoricalAccuracy()},
                     report=accuracy_report(), predictions=as_written(classification_predictions),
                     class_names=params.class_names, serving_inputs=serving_inputs,
                     serving_preprocess=serving_preprocess)
