"""Heads of the canned table models: classification (binary and multi-class: softmax over
`num_classes` logits) and regression (one float output; loss `mse` or `huber`; metrics MAE,
RMSE, R²), each as a `ModelSpec` around a Keras model.
"""
from __future__ import annotations

from tpuestimator.errors import ConfigError
from tpuestimator.models._layers import accuracy_report, classifier_loss, num_classes
from tpuestimator.spec import ModelSpec, classification_predictions

LOSSES = ("mse", "huber")


def task(params: dict) -> str:
    """`classification` or `regression`: the config's `params.task`, else the data's."""
    value = params.get("task", "classification")
    if value not in ("classification", "regression"):
        raise ConfigError("params.task", value, "classification | regression")
    return value


def output_units(params: dict) -> int:
    return 1 if task(params) == "regression" else num_classes(params)


def regression_loss(params: dict):
    """Per-example loss `(labels [b], outputs [b, 1]) -> [b]`: squared error, or Huber (`huber_delta`)."""
    import keras

    kind = params.get("loss", "mse")
    if kind not in LOSSES:
        raise ConfigError("params.loss", kind, " | ".join(LOSSES))
    delta = float(params.get("huber_delta", 1.0))

    def loss(labels, outputs):
        error = keras.ops.reshape(keras.ops.cast(labels, "float32"), (-1,)) - \
            keras.ops.reshape(keras.ops.cast(outputs, "float32"), (-1,))
        if kind == "mse":
            return keras.ops.square(error)
        absolute = keras.ops.abs(error)
        quadratic = keras.ops.minimum(absolute, delta)
        return 0.5 * keras.ops.square(quadratic) + delta * (absolute - quadratic)

    return loss


def regression_metrics() -> dict:
    """MAE (a mean of per-example values), RMSE and R² (Keras metrics over [b, 1] columns)."""
    import keras

    def column(x):
        return keras.ops.reshape(keras.ops.cast(x, "float32"), (-1, 1))

    class _RootMeanSquaredError(keras.metrics.RootMeanSquaredError):
        def update_state(self, y_true, y_pred, sample_weight=None):
            return super().update_state(column(y_true), column(y_pred),
                                        None if sample_weight is None else column(sample_weight))

    class _R2Score(keras.metrics.R2Score):
        def update_state(self, y_true, y_pred, sample_weight=None):
            return super().update_state(column(y_true), column(y_pred),
                                        None if sample_weight is None else column(sample_weight))

    def mae(labels, outputs):
        return keras.ops.abs(keras.ops.reshape(keras.ops.cast(labels, "float32"), (-1,))
                             - keras.ops.reshape(keras.ops.cast(outputs, "float32"), (-1,)))

    return {"mae": mae, "rmse": _RootMeanSquaredError(name="rmse"), "r2": _R2Score(name="r2")}


def regression_predictions(outputs) -> dict:
    """`prediction` [b]: the predicted number."""
    import tensorflow as tf

    return {"prediction": tf.reshape(tf.cast(outputs, tf.float32), [-1])}


def head_spec(params: dict, model, optimizer, *, serving_inputs=None, serving_preprocess=None) -> ModelSpec:
    """The `ModelSpec` of a canned model whose Keras `model` returns `output_units(params)` values."""
    if task(params) == "regression":
        return ModelSpec(model=model, loss=regression_loss(params), optimizer=optimizer,
                         metrics=regression_metrics(), predictions=regression_predictions,
                         serving_inputs=serving_inputs, serving_preprocess=serving_preprocess)
    import keras

    return ModelSpec(model=model, loss=classifier_loss(), optimizer=optimizer,
                     metrics={"accuracy": keras.metrics.SparseCategoricalAccuracy()},
                     report=accuracy_report(), predictions=classification_predictions,
                     class_names=params.get("vocabulary"), serving_inputs=serving_inputs,
                     serving_preprocess=serving_preprocess)
