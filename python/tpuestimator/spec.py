"""The model-function contract: what a model function returns.

TPUEstimator's ``model_fn(features, labels, mode, params)`` built a graph per mode and wrapped
its optimizer in ``CrossShardOptimizer``. In TensorFlow 2 a model function is called once,
inside the distribution strategy's scope, and returns a `ModelSpec`: the Keras model and the
pieces the Estimator needs to train, evaluate, predict and export it on any device. Gradient
aggregation across replicas, loss scaling by the global batch, padding masks and mixed
precision are the Estimator's job, never the model function's.
"""
from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tpuestimator.system.graph_code import as_written


class Mode(str, enum.Enum):
    TRAIN = "train"
    EVAL = "eval"
    PREDICT = "predict"


# A per-example loss: (labels, outputs) -> float tensor [batch]. Keras losses built with
# reduction=None qualify, e.g. keras.losses.SparseCategoricalCrossentropy(from_logits=True,
# reduction=None).
LossFn = Callable[[Any, Any], Any]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """What a model function returns.

    Attributes:
      model: a Keras model taking the input pipeline's features (a dict, or the single
        tensor when the features dict has one entry) and returning outputs (logits for the
        built-in classifiers).
      loss: per-example loss `(labels, outputs) -> [batch]` (no reduction: the Estimator
        averages over the GLOBAL batch and masks eval padding).
      optimizer: a Keras optimizer (or a zero-argument callable returning one).
      metrics: eval metrics: name -> a `keras.metrics.Metric` updated as
        `update_state(labels, outputs, sample_weight=mask)`, or a callable
        `(labels, outputs) -> [batch]` of per-example values that is averaged. The
        Estimator always adds `loss`.
      predictions: `outputs -> dict of tensors` with a leading batch dimension; default
        `{"outputs": outputs}`. With `class_names` set, the Estimator adds `class` (the
        string of `class_id`) as in TPUEstimator's flowers example (`tf.gather(LIST_OF_LABELS, class_int)`).
      class_names: the label vocabulary, index = class id.
      report: extra scalars to compute each step and report per loop in the hooks' logs:
        name -> `(labels, outputs) -> scalar`.
      serving_inputs: name -> `tf.TensorSpec` of one example (no batch dimension) for the
        SavedModel's `features` signature (also `serving_default` when the export has no
        tf.Example signature); default: the input pipeline's feature spec.
      serving_preprocess: optional `dict of raw serving tensors -> model features`, for
        signatures that take e.g. JPEG bytes (TPUEstimator's `serving_input_fn`).
    """

    model: Any
    loss: LossFn
    optimizer: Any
    metrics: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    predictions: Callable[[Any], Mapping[str, Any]] | None = None
    class_names: Sequence[str] | None = None
    report: Mapping[str, Callable[[Any, Any], Any]] = dataclasses.field(default_factory=dict)
    serving_inputs: Mapping[str, Any] | None = None
    serving_preprocess: Callable[[Mapping[str, Any]], Any] | None = None

    def __post_init__(self):
        from tpuestimator.errors import ModelFnError

        if self.model is None or not callable(self.model):
            raise ModelFnError(f"ModelSpec.model must be a Keras model. Received: model={self.model!r}")
        if not callable(self.loss):
            raise ModelFnError(
                "ModelSpec.loss must be a per-example loss callable (labels, outputs) -> [batch]. "
                f"Received: loss={self.loss!r}")
        if self.optimizer is None:
            raise ModelFnError("ModelSpec.optimizer is required, e.g. keras.optimizers.Adam(params['learning_rate']).")
        if "loss" in self.metrics:
            raise ModelFnError("ModelSpec.metrics must not define 'loss': the Estimator computes it exactly.")
        if self.class_names is not None and not all(isinstance(c, str) for c in self.class_names):
            raise ModelFnError(f"ModelSpec.class_names must be strings. Received: {list(self.class_names)!r}")


def classification_predictions(outputs) -> dict:
    """Softmax probabilities and the arg-max class id, as in TPUEstimator's flowers example."""
    import tensorflow as tf

    logits = tf.cast(outputs, tf.float32)
    probabilities = tf.nn.softmax(logits)
    return {"probabilities": probabilities, "class_id": tf.argmax(probabilities, axis=-1, output_type=tf.int32)}


@as_written
def split_element(element) -> tuple[dict, Any]:
    """One input element -> (features dict, labels or None).

    An input function's dataset yields `(features, labels)`, `(features,)` or `features`;
    `features` is a dict of tensors or a single tensor (named `x`). Every part of the library
    that reads an input element (the train step, evaluation, the debug replay, hooks) splits
    it with this function.
    """
    if isinstance(element, tuple):
        features, labels = element if len(element) == 2 else (element[0], None)
    else:
        features, labels = element, None
    if not isinstance(features, Mapping):
        features = {"x": features} if hasattr(features, "shape") else features
    return dict(features), labels


@as_written
def model_inputs(features: Mapping[str, Any]):
    """What the model is called with: the tensor alone when the features dict has one entry,
    the dict otherwise (so a one-input Keras model takes a plain tensor)."""
    if isinstance(features, Mapping) and len(features) == 1:
        return next(iter(features.values()))
    return features
