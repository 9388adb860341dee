"""`tf.compat.v1.metrics.*` in the shape a ported `metric_fn` keeps: one call per metric.

TF1's `tf.metrics.accuracy(labels, predictions)` created local variables in the graph and
returned `(value, update_op)`. TensorFlow 2 has no graph collections to hold those variables,
so each function here returns a `MetricUpdate`: which Keras metric streams the value and the
arguments of one `update_state` call. `porting.eval_metrics` creates the Keras metric once
(inside the distribution strategy's scope) and replays the update on every evaluation batch,
so a ported `metric_fn` changes its module prefix and nothing else:

    tf.metrics.accuracy(labels=labels, predictions=tf.argmax(logits, 1))        # TF1
    v1_metrics.accuracy(labels=labels, predictions=tf.argmax(logits, 1))        # here

`keras(factory, *args)` takes any other Keras metric.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "MetricUpdate", "accuracy", "mean", "precision", "recall", "auc", "mean_squared_error",
    "root_mean_squared_error", "mean_absolute_error", "mean_iou", "true_positives", "false_positives",
    "true_negatives", "false_negatives", "keras",
]


@dataclasses.dataclass(frozen=True)
class MetricUpdate:
    """One streaming metric of a ported `metric_fn`: TF1's `(value, update_op)` pair.

    Attributes:
      factory: zero-argument callable returning the `keras.metrics.Metric` that streams the
        value (called once, where the Estimator creates its metrics).
      args: the positional arguments of its `update_state` (tensors of this batch).
      weights: TF1's `weights=`, the `sample_weight` of the update (None: every example 1).
      kind: the TF1 function it replaces, for error messages.
    """

    factory: Callable[[], Any]
    args: tuple
    weights: Any = None
    kind: str = "keras"


def _keras_metrics():
    import keras

    return keras.metrics


def _checked_thresholds(kind: str, **unsupported: Any) -> None:
    given = {k: v for k, v in unsupported.items() if v is not None}
    if given:
        names = ", ".join(f"{k}={v!r}" for k, v in given.items())
        raise ValueError(f"porting.metrics.{kind} does not support {names} (TF1 collections and "
                         f"updates_collections do not exist in TensorFlow 2); use porting.metrics.keras(...) "
                         "with the Keras metric's own arguments instead.")


def accuracy(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
             name=None) -> MetricUpdate:
    """`tf.metrics.accuracy`: the fraction of `predictions` equal to `labels` (keras.metrics.Accuracy)."""
    _checked_thresholds("accuracy", metrics_collections=metrics_collections, updates_collections=updates_collections)
    return MetricUpdate(lambda: _keras_metrics().Accuracy(name=name or "accuracy"), (labels, predictions), weights,
                        "accuracy")


def mean(values, weights=None, metrics_collections=None, updates_collections=None, name=None) -> MetricUpdate:
    """`tf.metrics.mean`: the (weighted) mean of `values` over the evaluation (keras.metrics.Mean)."""
    _checked_thresholds("mean", metrics_collections=metrics_collections, updates_collections=updates_collections)
    return MetricUpdate(lambda: _keras_metrics().Mean(name=name or "mean"), (values,), weights, "mean")


def precision(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
              name=None) -> MetricUpdate:
    """`tf.metrics.precision` on 0/1 (or boolean) labels and predictions (keras.metrics.Precision)."""
    _checked_thresholds("precision", metrics_collections=metrics_collections, updates_collections=updates_collections)
    return MetricUpdate(lambda: _keras_metrics().Precision(name=name or "precision"), (labels, predictions), weights,
                        "precision")


def recall(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
           name=None) -> MetricUpdate:
    """`tf.metrics.recall` on 0/1 (or boolean) labels and predictions (keras.metrics.Recall)."""
    _checked_thresholds("recall", metrics_collections=metrics_collections, updates_collections=updates_collections)
    return MetricUpdate(lambda: _keras_metrics().Recall(name=name or "recall"), (labels, predictions), weights,
                        "recall")


def auc(labels, predictions, weights=None, num_thresholds=200, metrics_collections=None,
        updates_collections=None, curve="ROC", name=None, summation_method="careful_interpolation",
        thresholds=None) -> MetricUpdate:
    """`tf.metrics.auc`: ROC or PR area from scores in [0, 1] (keras.metrics.AUC, same thresholds)."""
    _checked_thresholds("auc", metrics_collections=metrics_collections, updates_collections=updates_collections)
    method = "interpolation" if summation_method == "careful_interpolation" else summation_method
    return MetricUpdate(lambda: _keras_metrics().AUC(num_thresholds=num_thresholds, curve=curve,
                                                     summation_method=method, thresholds=thresholds,
                                                     name=name or "auc"),
                        (labels, predictions), weights, "auc")


def mean_squared_error(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
                       name=None) -> MetricUpdate:
    """`tf.metrics.mean_squared_error` (keras.metrics.MeanSquaredError)."""
    _checked_thresholds("mean_squared_error", metrics_collections=metrics_collections,
                        updates_collections=updates_collections)
    return MetricUpdate(lambda: _keras_metrics().MeanSquaredError(name=name or "mean_squared_error"),
                        (labels, predictions), weights, "mean_squared_error")


def root_mean_squared_error(labels, predictions, weights=None, metrics_collections=None,
                            updates_collections=None, name=None) -> MetricUpdate:
    """`tf.metrics.root_mean_squared_error` (keras.metrics.RootMeanSquaredError)."""
    _checked_thresholds("root_mean_squared_error", metrics_collections=metrics_collections,
                        updates_collections=updates_collections)
    return MetricUpdate(lambda: _keras_metrics().RootMeanSquaredError(name=name or "root_mean_squared_error"),
                        (labels, predictions), weights, "root_mean_squared_error")


def mean_absolute_error(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
                        name=None) -> MetricUpdate:
    """`tf.metrics.mean_absolute_error` (keras.metrics.MeanAbsoluteError)."""
    _checked_thresholds("mean_absolute_error", metrics_collections=metrics_collections,
                        updates_collections=updates_collections)
    return MetricUpdate(lambda: _keras_metrics().MeanAbsoluteError(name=name or "mean_absolute_error"),
                        (labels, predictions), weights, "mean_absolute_error")


def mean_iou(labels, predictions, num_classes, weights=None, metrics_collections=None, updates_collections=None,
             name=None) -> MetricUpdate:
    """`tf.metrics.mean_iou` on class ids (keras.metrics.MeanIoU)."""
    _checked_thresholds("mean_iou", metrics_collections=metrics_collections, updates_collections=updates_collections)
    return MetricUpdate(lambda: _keras_metrics().MeanIoU(num_classes=num_classes, name=name or "mean_iou"),
                        (labels, predictions), weights, "mean_iou")


def _confusion_count(kind: str, keras_name: str):
    def count(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
              name=None) -> MetricUpdate:
        _checked_thresholds(kind, metrics_collections=metrics_collections, updates_collections=updates_collections)
        return MetricUpdate(lambda: getattr(_keras_metrics(), keras_name)(name=name or kind),
                            (labels, predictions), weights, kind)
    count.__name__ = kind
    count.__doc__ = f"`tf.metrics.{kind}` on 0/1 (or boolean) labels and predictions (keras.metrics.{keras_name})."
    return count


true_positives = _confusion_count("true_positives", "TruePositives")
false_positives = _confusion_count("false_positives", "FalsePositives")
true_negatives = _confusion_count("true_negatives", "TrueNegatives")
false_negatives = _confusion_count("false_negatives", "FalseNegatives")


def keras(factory, *args, sample_weight=None) -> MetricUpdate:
    """Any Keras metric: `factory` is its class or a zero-argument callable returning one
    (`lambda: keras.metrics.AUC(num_thresholds=50)`), `args` the tensors of its `update_state`.

    A metric INSTANCE is refused: `metric_fn` runs on every evaluation trace, and a metric
    created there would be a new set of variables each time.
    """
    if not callable(factory) or _is_metric_instance(factory):
        raise TypeError("porting.metrics.keras takes a Keras metric class or a zero-argument factory "
                        f"(e.g. keras.metrics.AUC or lambda: keras.metrics.AUC(num_thresholds=50)). Received: {factory!r}")
    return MetricUpdate(factory, tuple(args), sample_weight, getattr(factory, "__name__", "keras"))


def _is_metric_instance(obj) -> bool:
    return isinstance(obj, _keras_metrics().Metric)


def describe(updates: Mapping[str, Any]) -> dict[str, str]:
    """{name: kind} of a metric_fn's result, for logs and errors."""
    return {name: getattr(u, "kind", type(u).__name__) for name, u in updates.items()}
