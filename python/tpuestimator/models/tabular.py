"""`linear` and `mlp` model functions over any numeric features (flattened and concatenated)."""
from __future__ import annotations

from tpuestimator.models._layers import accuracy_report, classifier_loss, feature_inputs
from tpuestimator.models.params import DataParams
from tpuestimator.spec import ModelSpec, classification_predictions
from tpuestimator.system.graph_code import as_written


def _flat_inputs(params):
    import keras

    inputs = feature_inputs(params)
    tensors = list(inputs.values()) if isinstance(inputs, dict) else [inputs]
    # Integer features are cast so one Dense layer can read every feature.
    flat = [keras.layers.Flatten()(keras.ops.cast(t, "float32")) for t in tensors]
    x = flat[0] if len(flat) == 1 else keras.layers.Concatenate()(flat)
    return inputs, x


def _head(params, inputs, x, name):
    import keras

    data = DataParams.from_params(params)
    if data.is_regression:
        out = keras.layers.Dense(params.get("num_outputs", 1), dtype="float32", name="outputs")(x)
        mse = keras.losses.MeanSquaredError(reduction=None)
        return ModelSpec(
            model=keras.Model(inputs, out, name=name),
            loss=lambda labels, outputs: mse(labels[..., None] if len(labels.shape) == 1 else labels, outputs),
            optimizer=_optimizer(params),
            metrics={"mae": keras.metrics.MeanAbsoluteError()},
            predictions=lambda outputs: {"predictions": outputs},
        )
    logits = keras.layers.Dense(data.classes(), dtype="float32", name="logits")(x)
    return ModelSpec(
        model=keras.Model(inputs, logits, name=name),
        loss=classifier_loss(),
        optimizer=_optimizer(params),
        metrics={"accuracy": keras.metrics.SparseCategoricalAccuracy()},
        report=accuracy_report(),
        predictions=as_written(classification_predictions),
        class_names=data.class_names,
    )


def _optimizer(params):
    import keras

    lr = params.get("learning_rate", 0.01)
    kind = params.get("optimizer", "adam")
    if kind == "sgd":
        return keras.optimizers.SGD(learning_rate=lr)
    return keras.optimizers.Adam(learning_rate=lr)


def linear(params: dict) -> ModelSpec:
    """Logistic (or, with task: regression, linear) regression on the flattened features."""
    inputs, x = _flat_inputs(params)
    return _head(params, inputs, x, "linear")


def mlp(params: dict) -> ModelSpec:
    """Dense layers `hidden_units` (default [128, 64]) with ReLU and `dropout` (0.0), then the head."""
    import keras

    inputs, x = _flat_inputs(params)
    for units in params.get("hidden_units", [128, 64]):
        x = keras.layers.Dense(units, activation="relu")(x)
        if params.get("dropout", 0.0):
            x = keras.layers.Dropout(params["dropout"])(x)
    return _head(params, inputs, x, "mlp")
