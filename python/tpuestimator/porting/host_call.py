"""`TPUEstimatorSpec(host_call=(host_call_fn, tensors))` onto `HostCallHook`.

TPUEstimator sent `tensors` (each reshaped to `[1]`) from every TPU step to the host, where
`host_call_fn(*tensors)` wrote `tf.contrib.summary` scalars. Here the device records each
step's values (`ModelSpec.report`, one buffer per value for the whole loop) and the host reads
them once per loop (`HostCallHook`); `HostCall` then calls `host_call_fn` once per step, in
order, with each value as a `[1]`-shaped numpy array (so `gs[0]`, `loss[0]` keep working),
inside a default summary writer at that step: `tf.summary.scalar(name, value[0])` writes
where `tf.contrib.summary.scalar(name, value[0], step=gs)` did.

    host_call = HostCall(host_call_fn, ["global_step", "loss", "learning_rate"], logdir=model_dir)
    ModelSpec(..., optimizer=optimizer, report=host_call.report(optimizer))
    estimator.train(input_fn, max_steps=..., hooks=[host_call])

Entries of `tensors`: `"global_step"` (the step, from the host), `"loss"` (the step's mean
loss, always recorded), `"learning_rate"` (the optimizer's rate at that step: pass the
optimizer to `report`), or a callable `(labels, outputs) -> scalar` computed on the device
(averaged over the replicas). A list maps onto `host_call_fn`'s positional parameters, a dict
onto its keyword parameters.
"""
from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tpuestimator.errors import ModelFnError
from tpuestimator.hooks.host_call import HostCallHook

HOST_ENTRIES = ("global_step", "loss")
PREFIX = "host_call_"


class HostCall(HostCallHook):
    """A `HostCallHook` that calls a TPUEstimator `host_call_fn` once per training step.

    Args:
      host_call_fn: the TF1 host call function (its `tf.contrib.summary` writer set-up and
        `all_summary_ops()` removed: the writer is the default one here).
      tensors: list (positional) or dict (keyword) of entries, see the module docstring.
      logdir: summaries go to this folder (TPUEstimator wrote them to `model_dir`); None: no
        default writer (host_call_fn gets the values only).
    """

    def __init__(self, host_call_fn: Callable[..., Any], tensors: Sequence[Any] | Mapping[str, Any], *,
                 logdir: str | None = None):
        if not callable(host_call_fn):
            raise TypeError(f"host_call_fn must be callable. Received: {host_call_fn!r}")
        self.host_call_fn = host_call_fn
        self.positional = not isinstance(tensors, Mapping)
        self.entries = _named_entries(host_call_fn, tensors)
        self.summary_dir = os.fspath(logdir) if logdir is not None else None
        self._summary_writer = None
        device_names = [PREFIX + name for name, entry in self.entries if entry not in HOST_ENTRIES]
        super().__init__(fn=self._call_host_fn, names=["loss", *device_names])

    def report(self, optimizer=None) -> dict[str, Callable[[Any, Any], Any]]:
        """`ModelSpec.report` entries for the values computed on the device (merge with yours).

        Raises:
          ModelFnError: an entry is "learning_rate" and no optimizer was given.
        """
        out = {}
        for name, entry in self.entries:
            if entry in HOST_ENTRIES:
                continue
            if entry == "learning_rate":
                if optimizer is None:
                    raise ModelFnError("HostCall entry 'learning_rate' needs the optimizer: "
                                       "ModelSpec(report=host_call.report(optimizer)).")
                out[PREFIX + name] = _learning_rate_of(optimizer)
            else:
                out[PREFIX + name] = entry
        return out

    def _call_host_fn(self, step: int, values: dict) -> None:
        import numpy as np

        args = {}
        for name, entry in self.entries:
            if entry == "global_step":
                args[name] = np.asarray([step], np.int64)
            elif entry == "loss":
                args[name] = np.asarray([values["loss"]], np.float32)
            else:
                args[name] = np.asarray([values[PREFIX + name]], np.float32)
        writer = self._writer_for_summaries()
        if writer is None:
            self._invoke(args)
            return
        with writer.as_default(step=step):
            self._invoke(args)

    def _invoke(self, args: dict) -> None:
        if self.positional:
            self.host_call_fn(*args.values())
        else:
            self.host_call_fn(**args)

    def _writer_for_summaries(self):
        if self.summary_dir is None:
            return None
        if self._summary_writer is None:
            import tensorflow as tf

            self._summary_writer = tf.summary.create_file_writer(self.summary_dir)
        return self._summary_writer

    def end(self, step, logs):
        super().end(step, logs)
        if self._summary_writer is not None:
            self._summary_writer.flush()

    def close(self):
        super().close()
        if self._summary_writer is not None:
            self._summary_writer.close()
            self._summary_writer = None


def _named_entries(fn, tensors) -> list[tuple[str, Any]]:
    """[(parameter name, entry)]: a list takes host_call_fn's positional parameter names."""
    if isinstance(tensors, Mapping):
        items = list(tensors.items())
    elif isinstance(tensors, (list, tuple)):
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        items = [(params[i] if i < len(params) else f"arg{i}", entry) for i, entry in enumerate(tensors)]
    else:
        raise ModelFnError(f"host_call tensors must be a list or dict (TPUEstimator's form). Received: {tensors!r}")
    for name, entry in items:
        if isinstance(entry, str) and entry not in (*HOST_ENTRIES, "learning_rate"):
            raise ModelFnError(f"host_call tensors entry {name!r} is {entry!r}: a string entry must be one of "
                               "'global_step', 'loss', 'learning_rate'; compute anything else with a callable "
                               "(labels, outputs) -> scalar.")
        if not isinstance(entry, str) and not callable(entry):
            raise ModelFnError(f"host_call tensors entry {name!r} is {entry!r}: TPUEstimator's graph tensors do not "
                               "exist here; use 'global_step', 'loss', 'learning_rate' or a callable "
                               "(labels, outputs) -> scalar.")
    return items


def _learning_rate_of(optimizer):
    def learning_rate(labels, outputs):
        import tensorflow as tf

        inner = getattr(optimizer, "inner_optimizer", optimizer)  # LossScaleOptimizer (mixed_float16)
        return tf.cast(inner.learning_rate, tf.float32)
    return learning_rate
