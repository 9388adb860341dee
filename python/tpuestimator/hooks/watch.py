"""`WatchHook`: TF1's `tf.Print(..., first_n=, summarize=)` for TensorFlow 2 (`debug.watch`).

Every `every_n_loops` loops, for the first `first_n` times, the hook logs the first
`summarize` values of named model outputs: prediction keys (`probabilities`, `class_id`,
`outputs`) or the outputs of named Keras layers (functional models). They are computed on the
host at the loop boundary, on one fixed batch of the training input (read once through a
separate, non-distributed pipeline, so the training stream is untouched), in inference mode.
Nothing runs inside the device loop. The values go to the log (`tpuestimator.hooks.watch`),
which the CLI shows on stderr and the run record keeps in output.log.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from tpuestimator.core.hooks import Hook

logger = logging.getLogger(__name__)


def format_values(name: str, value, summarize: int) -> str:
    """`name [64, 10] float32: [0.1 0.2 0.3 ...] min=.. max=.. mean=.. nan=0 inf=0`."""
    import numpy as np

    arr = np.asarray(value)
    flat = arr.reshape(-1)
    head = flat[:summarize]
    if arr.dtype.kind == "f":
        shown = " ".join(f"{v:.6g}" for v in head)
    else:
        shown = " ".join(str(v.decode() if isinstance(v, bytes) else v) for v in head)
    more = " ..." if flat.size > summarize else ""
    text = f"{name} {list(arr.shape)} {arr.dtype.name}: [{shown}{more}]"
    if arr.dtype.kind in "fiu" and flat.size:
        finite = flat[np.isfinite(flat)] if arr.dtype.kind == "f" else flat
        if finite.size:
            text += f" min={finite.min():.6g} max={finite.max():.6g} mean={finite.mean():.6g}"
        if arr.dtype.kind == "f":
            text += f" nan={int(np.isnan(flat).sum())} inf={int(np.isinf(flat).sum())}"
    return text


class WatchHook(Hook):
    """Logs the first `summarize` values of named outputs every `every_n_loops` loops.

    Args:
      outputs: prediction keys and/or Keras layer names.
      first_n: log at most this many times (None: every time), as tf.Print's `first_n`.
      summarize: how many leading values of each tensor to show (tf.Print's default 3).
      every_n_loops: log every K loops.
      input_fn: the input to take the watched batch from (default: the training input).
      log: a callable `log(line)` instead of the module logger (e.g. for tests).

    Attributes:
      records: list of (step, {name: numpy array}) of what was logged (the watched values).
    """

    def __init__(self, outputs: Sequence[str], *, first_n: int | None = None, summarize: int = 3,
                 every_n_loops: int = 1, input_fn: Callable | None = None, log: Callable[[str], Any] | None = None,
                 keep: bool = False, field: str = "debug.watch"):
        from tpuestimator.errors import ConfigError

        if isinstance(outputs, str) or not outputs:
            raise ConfigError(f"{field}.outputs", outputs, "a non-empty list of prediction keys or layer names")
        for name, value, lowest in (("first_n", first_n, 1), ("summarize", summarize, 1),
                                    ("every_n_loops", every_n_loops, 1)):
            if value is not None and (not isinstance(value, int) or value < lowest):
                raise ConfigError(f"{field}.{name}", value, f"an integer >= {lowest}")
        self.outputs = list(outputs)
        self.first_n = first_n
        self.summarize = summarize
        self.every_n_loops = every_n_loops
        self.input_fn = input_fn
        self.log = log
        self.keep = keep
        self.field = field
        self.records: list[tuple[int, dict]] = []
        self._loops = 0
        self._shown = 0
        self._fn = None

    # ---------------------------------------------------------------- set-up
    def begin(self, step, info):
        if self._fn is None:
            self._fn = self._build()

    def _batch(self):
        from tpuestimator.spec import Mode, split_element

        est = self.estimator
        input_fn = self.input_fn or (est.train_input.input_fn if est.train_input else None)
        if input_fn is None:
            raise RuntimeError("WatchHook: no input to take the watched batch from; pass input_fn=")
        params = est.input_params(Mode.TRAIN)
        params["start_step"] = 0
        element = next(iter(input_fn(params).take(1)))
        features, _ = split_element(element)
        return features

    def _build(self):
        import keras

        from tpuestimator.errors import ConfigError
        from tpuestimator.spec import model_inputs

        est = self.estimator
        spec = est.spec
        model = spec.model
        features = self._batch()
        inputs = model_inputs(features)
        outputs = model(inputs, training=False)
        predictions = dict(spec.predictions(outputs)) if spec.predictions else {"outputs": outputs}
        predictions.setdefault("outputs", outputs)
        layer_names = [layer.name for layer in getattr(model, "layers", [])]
        wanted_layers = [n for n in self.outputs if n not in predictions]
        unknown = [n for n in wanted_layers if n not in layer_names]
        if unknown:
            raise ConfigError(f"{self.field}.outputs", unknown[0] if len(unknown) == 1 else unknown,
                              "prediction keys (" + ", ".join(sorted(predictions)) + ") or layer names of the "
                              "model (" + ", ".join(layer_names) + ")")
        probe = None
        if wanted_layers:
            try:
                probe = keras.Model(model.inputs, [model.get_layer(n).output for n in wanted_layers])
            except (AttributeError, ValueError, TypeError) as exc:
                raise ConfigError(f"{self.field}.outputs", wanted_layers,
                                  "prediction keys: layer outputs can only be watched in functional Keras models "
                                  f"({type(exc).__name__}: {exc})") from None

        def compute() -> dict:
            out = model(inputs, training=False)
            preds = dict(spec.predictions(out)) if spec.predictions else {"outputs": out}
            preds.setdefault("outputs", out)
            values = {n: preds[n] for n in self.outputs if n in preds}
            if probe is not None:
                got = probe(inputs, training=False)
                got = got if isinstance(got, (list, tuple)) else [got]
                values.update(zip(wanted_layers, got))
            return {n: values[n].numpy() if hasattr(values[n], "numpy") else values[n] for n in self.outputs}
        return compute

    # ---------------------------------------------------------------- events
    def after_loop(self, step, logs):
        self._loops += 1
        if self._loops % self.every_n_loops or (self.first_n is not None and self._shown >= self.first_n):
            return
        if self._fn is None:
            self._fn = self._build()
        values = self._fn()
        self._shown += 1
        if self.keep:
            self.records.append((step, values))
        for name, value in values.items():
            line = f"watch | step: {step:>7d} | " + format_values(name, value, self.summarize)
            if self.log is not None:
                self.log(line)
            else:
                logger.info(line)
