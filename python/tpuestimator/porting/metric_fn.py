"""`TPUEstimatorSpec(eval_metrics=(metric_fn, tensors))` as `ModelSpec.metrics`.

TPUEstimator shipped `tensors` from the TPU to the host and called `metric_fn(*tensors)` there,
once per graph; `metric_fn` returned `{name: tf.metrics.<fn>(...)}`, i.e. `(value, update_op)`
pairs over graph-local variables. Here a model function is called once and every evaluation
batch runs on the device, so:

- `tensors` name what `metric_fn` receives in terms of each batch's `labels` and the model's
  `outputs`: a list (positional arguments) or dict (keyword arguments) whose entries are
  `"labels"`, `"outputs"` (alias `"logits"`) or a callable `(labels, outputs) -> tensor`.
- `metric_fn` returns `{name: porting.metrics.<fn>(...)}` (the `tf.metrics` functions with the
  same arguments), `porting.metrics.keras(KerasMetricClass, *tensors)`, or a per-example
  tensor (averaged, as `tf.metrics.mean` would).
- `eval_metrics` calls `metric_fn` once on symbolic tensors to learn the names and metric
  kinds, creates one Keras metric per name (in the model function, so inside the strategy's
  scope), and on every batch replays `metric_fn` and updates each metric. The Estimator's
  padding mask (several replicas, TPUs) is multiplied into each update's weights, so padded
  examples never count: the tensors must keep their batch dimension first, as TPUEstimator
  already required.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tpuestimator.errors import ModelFnError
from tpuestimator.porting.metrics import MetricUpdate

ALIASES = {"labels": "labels", "outputs": "outputs", "logits": "outputs"}


def eval_metrics(metric_fn: Callable[..., Mapping[str, Any]], tensors: Sequence[Any] | Mapping[str, Any] | None = None,
                 *, labels: Any = None, outputs: Any = None) -> dict:
    """`ModelSpec.metrics` from a TPUEstimator `(metric_fn, tensors)` pair.

    Args:
      metric_fn: the ported metric function (see the module docstring).
      tensors: what `metric_fn` receives; default `["labels", "outputs"]`.
      labels, outputs: optional shape/dtype of one batch's labels and the model's outputs
        (a `tf.TensorSpec`, or the model's Keras output tensor `model.output`) for the one
        symbolic call of `metric_fn`; default: int32 labels and float32 outputs of unknown
        shape. Give them when `metric_fn` needs a known rank or dtype.

    Returns:
      {name: keras.metrics.Metric} for `ModelSpec(metrics=...)`.

    Raises:
      ModelFnError: `metric_fn` fails on symbolic tensors, or returns something that cannot
        stream (a TF1 `(value, update_op)` tuple, a Keras metric instance, ...).
    """
    runner = _MetricFnRunner(metric_fn, _resolver(tensors))
    updates = runner.discover(labels, outputs)
    metric_class = tensors_metric_class()
    return {name: metric_class(name, update.factory(), runner) for name, update in updates.items()}


def _resolver(tensors) -> Callable[[Any, Any], tuple[tuple, dict]]:
    """(labels, outputs) -> (positional args, keyword args) of `metric_fn`."""
    if tensors is None:
        tensors = ["labels", "outputs"]

    def one(entry, where: str):
        if isinstance(entry, str):
            if entry not in ALIASES:
                raise ModelFnError(f"eval_metrics tensors{where} is {entry!r}: a string entry must be one of "
                                   f"{sorted(ALIASES)}; compute anything else with a callable (labels, outputs) -> tensor.")
            key = ALIASES[entry]
            return lambda labels, outputs: labels if key == "labels" else outputs
        if callable(entry):
            return entry
        raise ModelFnError(f"eval_metrics tensors{where} is {entry!r}: TPUEstimator's graph tensors do not exist here; "
                           "name 'labels' or 'outputs', or pass a callable (labels, outputs) -> tensor.")

    if isinstance(tensors, Mapping):
        getters = {key: one(entry, f"[{key!r}]") for key, entry in tensors.items()}
        return lambda labels, outputs: ((), {k: g(labels, outputs) for k, g in getters.items()})
    if isinstance(tensors, (list, tuple)):
        getters_list = [one(entry, f"[{i}]") for i, entry in enumerate(tensors)]
        return lambda labels, outputs: (tuple(g(labels, outputs) for g in getters_list), {})
    raise ModelFnError(f"eval_metrics tensors must be a list or dict (TPUEstimator's form). Received: {tensors!r}")


class _MetricFnRunner:
    """Calls `metric_fn` on a batch's tensors, once per batch however many metrics read it."""

    def __init__(self, metric_fn, resolve):
        self.metric_fn = metric_fn
        self.resolve = resolve
        self._last: tuple | None = None

    def updates(self, labels, outputs) -> dict[str, MetricUpdate]:
        if self._last is not None and self._last[0] is labels and self._last[1] is outputs:
            return self._last[2]
        args, kwargs = self.resolve(labels, outputs)
        result = _as_updates(self.metric_fn(*args, **kwargs), getattr(self.metric_fn, "__name__", "metric_fn"))
        self._last = (labels, outputs, result)
        return result

    def discover(self, labels_like, outputs_like) -> dict[str, MetricUpdate]:
        """The metric names and kinds, from one call on symbolic tensors in a scratch graph."""
        import tensorflow as tf

        labels_spec = _spec(labels_like, tf.int32)
        outputs_spec = _spec(outputs_like, tf.float32)
        found: dict = {}

        def probe(labels, outputs):
            found.update(self.updates(labels, outputs))
            return tf.constant(0)

        try:
            tf.function(probe, autograph=False).get_concrete_function(labels_spec, outputs_spec)
        except ModelFnError:
            raise
        except Exception as exc:  # the user's metric_fn on symbolic tensors: any TF error
            raise ModelFnError(
                f"eval_metrics could not call {getattr(self.metric_fn, '__name__', 'metric_fn')} on symbolic labels "
                f"{labels_spec} and outputs {outputs_spec}: {type(exc).__name__}: {exc}. Pass labels=/outputs= "
                "(a tf.TensorSpec or model.output) with the shapes and dtypes it needs.") from None
        finally:
            self._last = None
        if not found:
            raise ModelFnError("eval_metrics: the metric function returned no metrics.")
        return found


def _spec(like, default_dtype):
    import tensorflow as tf

    if like is None:
        return tf.TensorSpec(None, default_dtype)
    shape = getattr(like, "shape", None)
    dtype = tf.as_dtype(getattr(like, "dtype", default_dtype))
    return tf.TensorSpec(None if shape is None else [None, *list(shape)[1:]], dtype)


def _as_updates(result, fn_name: str) -> dict[str, MetricUpdate]:
    import keras
    import tensorflow as tf

    if not isinstance(result, Mapping):
        raise ModelFnError(f"{fn_name} must return a dict {{name: metric}}, as TPUEstimator's metric_fn did. "
                           f"Received: {type(result).__name__}")
    out = {}
    for name, value in result.items():
        if isinstance(value, MetricUpdate):
            out[name] = value
        elif isinstance(value, keras.metrics.Metric):
            raise ModelFnError(f"{fn_name}()['{name}'] is a Keras metric instance, created anew on every trace; "
                               f"return porting.metrics.keras({type(value).__name__}, <its update_state tensors>) instead.")
        elif isinstance(value, tuple):
            raise ModelFnError(f"{fn_name}()['{name}'] is a (value, update_op) tuple: TF1's tf.metrics need graph "
                               "collections that TensorFlow 2 does not have. Use the same call from "
                               "tpuestimator.porting.metrics (e.g. metrics.accuracy(labels=..., predictions=...)).")
        elif tf.is_tensor(value):
            out[name] = MetricUpdate(lambda n=name: keras.metrics.Mean(name=n), (value,), None, "mean")
        else:
            raise ModelFnError(f"{fn_name}()['{name}'] must be a porting.metrics result or a per-example tensor. "
                               f"Received: {value!r}")
    return out


def _combined_weights(weights, mask):
    import tensorflow as tf

    if mask is None:
        return weights
    if weights is None:
        return mask
    weights = tf.cast(weights, mask.dtype)
    extra = max(weights.shape.rank - 1, 0) if weights.shape.rank is not None else 0
    return weights * tf.reshape(mask, [-1] + [1] * extra)


@functools.cache
def tensors_metric_class():
    """The Keras metric class of one ported metric (built on first use: Keras loads lazily)."""
    import keras

    class TensorsMetric(keras.metrics.Metric):
        """One metric of a ported `metric_fn`: `update_state(labels, outputs, sample_weight=mask)`
        replays the metric function on the batch and updates the Keras metric it named."""

        def __init__(self, key: str, inner, runner: _MetricFnRunner):
            super().__init__(name=key)
            self.key = key
            self.inner = inner
            self.runner = runner

        def update_state(self, labels, outputs, sample_weight=None):
            update = self.runner.updates(labels, outputs)[self.key]
            self.inner.update_state(*update.args, sample_weight=_combined_weights(update.weights, sample_weight))

        def result(self):
            return self.inner.result()

        def reset_state(self):
            self.inner.reset_state()

    return TensorsMetric
