"""Small helpers the built-in model functions share: inputs from the feature spec."""
from __future__ import annotations

from tpuestimator.errors import ModelFnError
from tpuestimator.system.graph_code import as_written


def feature_inputs(params: dict):
    """Keras inputs for every feature in `params['feature_spec']` (name -> (shape, dtype)).

    Returns the single Input when there is one feature (the Estimator passes the tensor
    alone then), else a dict of Inputs.
    """
    import keras

    spec = params.get("feature_spec")
    if not spec:
        raise ModelFnError("params['feature_spec'] is missing: the Estimator sets it from the input function.")
    inputs = {name: keras.Input(shape=tuple(shape), dtype=dtype, name=name) for name, (shape, dtype) in spec.items()}
    if len(inputs) == 1:
        return next(iter(inputs.values()))
    return inputs


def image_input(params: dict):
    """The `image` feature's Input; a clear error when the data has no image."""
    inputs = feature_inputs(params)
    if isinstance(inputs, dict):
        if "image" not in inputs:
            raise ModelFnError(f"this model needs an `image` feature; the data has {sorted(inputs)}")
        return inputs, inputs["image"]
    if len(inputs.shape) != 4:
        raise ModelFnError(f"this model needs images [batch, height, width, channels]; the feature has shape {inputs.shape}")
    return inputs, inputs


def classifier_loss():
    import keras

    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)


def accuracy_report() -> dict:
    """``ModelSpec.report`` for a classifier: the training ``accuracy`` of each loop, recorded
    beside the evaluation's ``val_accuracy`` (tfruns charts the pair only together)."""
    import keras

    def accuracy(labels, outputs):
        return keras.metrics.sparse_categorical_accuracy(labels, outputs)

    return {"accuracy": as_written(accuracy)}
