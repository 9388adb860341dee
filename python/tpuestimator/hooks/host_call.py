"""`HostCallHook`: per-step values computed on the device, written on the host (TPUEstimator's
`host_call`).

The loop-level logs average the loss and the ModelSpec's `report` scalars over each loop
(`SummaryHook` writes those). With this hook the Estimator switches to a train loop that also
stores every step's value, averaged over the replicas, in a device-side `tf.Variable` buffer
of length `iterations_per_loop`; after each loop the host reads the buffers once and this hook
writes one TensorBoard scalar per step (tags `step/<name>` in `<logdir>/train`, all of a loop
in one `tf.function` call) and/or calls `fn(step, values)` for each step. Without the hook the
default loop runs: zero cost.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from tpuestimator.core.hooks import Hook

logger = logging.getLogger(__name__)


class HostCallHook(Hook):
    """Writes each training step's loss and `report` values (not just the loop averages).

    Args:
      logdir: TensorBoard log folder; the scalars go to `<logdir>/train` as `step/<name>`.
        None: no summaries (use `fn`).
      fn: optional `fn(step: int, values: dict[str, float])` called on the host for every
        step, in order (the TPUEstimator `host_call_fn` analogue).
      names: the values to write (default: all of `loss` and the report names).

    Attributes:
      history: list of (step, {name: value}) when `keep_history=True`.
    """

    wants_per_step_values = True  # declared on Hook: switches on the recording loop

    def __init__(self, logdir: str | None = None, fn: Callable[[int, dict], Any] | None = None, *,
                 names: list[str] | None = None, prefix: str = "step/", keep_history: bool = False):
        if logdir is None and fn is None and not keep_history:
            raise ValueError("HostCallHook needs a `logdir` to write summaries to, a `fn(step, values)`, "
                             "or keep_history=True.")
        self.logdir = os.fspath(logdir) if logdir is not None else None
        self.fn = fn
        self.names = list(names) if names else None
        self.prefix = prefix
        self.keep_history = keep_history
        self.history: list[tuple[int, dict]] = []
        self._writer = None
        self._rows_writer = None

    def after_loop(self, step: int, logs: Mapping[str, Any]) -> None:
        values = self.estimator.per_step_values
        if not values:
            return
        names = [n for n in (self.names or values) if n in values]
        ran = len(next(iter(values.values())))
        first = step - ran + 1
        rows = [(first + i, {n: float(values[n][i]) for n in names}) for i in range(ran)]
        if self.logdir is not None:
            import tensorflow as tf

            from tpuestimator.hooks.builtin import ScalarRowsWriter

            if self._writer is None:
                self._writer = tf.summary.create_file_writer(os.path.join(self.logdir, "train"))
                self._rows_writer = ScalarRowsWriter(self._writer)
            self._rows_writer.write([(s, {self.prefix + n: v for n, v in row.items()}) for s, row in rows])
        if self.fn is not None:
            for s, row in rows:
                self.fn(s, row)
        if self.keep_history:
            self.history.extend(rows)

    def end(self, step, logs):
        if self._writer is not None:
            self._writer.flush()

    def close(self):
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            self._rows_writer = None
