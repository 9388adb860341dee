"""Debugger V2 dumps limited to training steps a..b (`debug.dump`), and reading them back.

`DumpHook` calls `tf.debugging.experimental.enable_dump_debug_info(dir, tensor_debug_mode=
mode, op_regex=...)` at the loop boundary before step a and `disable_dump_debug_info()` after
step b. Steps are 1-based (step k leaves the global step at k). The Estimator splits the
loops around the window (`steps_to_boundary`): inside it every loop is ONE step, so each
step is one execution of the train-loop function in the dump, and the loops outside keep
their `iterations_per_loop`.

Dumping instruments graphs when they are traced, so the hook swaps in a freshly traced train
loop when dumping starts (`Estimator.swap_train_loop`) and puts the original (uninstrumented)
one back when it stops: the steps after the window run at full speed with no retrace.

Two TensorFlow 2.21 behaviours shape the implementation: running an instrumented function
after `disable_dump_debug_info()` crashes the process when the dump writes without a circular
buffer (`circular_buffer_size=-1`), and enabling dumping into the same folder a second time
in one process crashes too. So the hook dumps through a circular buffer (default 1,000,000
events, flushed when dumping stops; raise it if a long window overflows it) and refuses a
folder it already dumped into in this process (use a new `debug.dump.dir`).
Functions first traced inside the window (the sentinel's check, an evaluation) stay
instrumented but only ever fill that bounded, never-written buffer afterwards.

TensorBoard's Debugger V2 plugin reads the dump folder: `tensorboard --logdir DIR`.
Checkpoints saved inside the window and host-side summary writes appear in the dump as eager
executions (SaveV2, WriteScalarSummary, ...).
"""
from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from tpuestimator.hooks.profiler import StepWindow, StepWindowHook, step_window

logger = logging.getLogger(__name__)

MODES = ("NO_TENSOR", "CURT_HEALTH", "CONCISE_HEALTH", "FULL_HEALTH", "SHAPE", "FULL_TENSOR")
DEFAULT_BUFFER = 1_000_000
_DUMPED_DIRS: set[str] = set()  # enable_dump_debug_info may run once per folder and process (see above)


class DumpHook(StepWindowHook):
    # Stopping when training leaves its loops (StepWindowHook: an evaluation, the end) means
    # nothing else is dumped and no instrumented loop outlives the dump.
    """Writes Debugger V2 dumps of training steps `first..last` into `dump_dir`.

    Args:
      dump_dir: the dump root (TensorBoard's logdir for the Debugger V2 plugin).
      steps: `[first, last]`, 1-based and inclusive.
      mode: the tensor debug mode (FULL_HEALTH: per-tensor counts of NaN, -Inf, +Inf, ...).
      op_regex: dump only ops whose type matches (e.g. ``"(?!^(Const|Identity)$)"``).
      circular_buffer_size: events kept per file until dumping stops (> 0).

    Attributes:
      dumped_steps: the steps that ran with dumping on, e.g. [5, 6, 7].
    """

    def __init__(self, dump_dir: str, steps: Sequence[int], *, mode: str = "FULL_HEALTH",
                 op_regex: str | None = None, circular_buffer_size: int = DEFAULT_BUFFER,
                 field: str = "debug.dump"):
        from tpuestimator.errors import ConfigError

        if mode not in MODES:
            raise ConfigError(f"{field}.mode", mode, "one of " + ", ".join(MODES))
        if not dump_dir:
            raise ConfigError(f"{field}.dir", dump_dir, "a folder for the dump")
        if not isinstance(circular_buffer_size, int) or circular_buffer_size < 1:
            raise ValueError(f"DumpHook: circular_buffer_size ({circular_buffer_size!r}) must be a positive integer "
                             "(-1 crashes TensorFlow 2.21 when instrumented functions run after dumping stops).")
        first, last = step_window(steps, f"{field}.steps")
        self.dump_dir = os.fspath(dump_dir)
        self.window = StepWindow(first, last, per_step=True)
        self.mode = mode
        self.op_regex = op_regex
        self.circular_buffer_size = circular_buffer_size
        self.active = False
        self.done = False
        self.dumped_steps: list[int] = []
        self._original_loop = None

    def steps_to_boundary(self, step: int) -> int | None:
        return None if self.done else self.window.steps_to_boundary(step)

    def begin(self, step, info):
        if self.done or self.active or step >= self.window.last:
            return
        import glob

        from tpuestimator.errors import ConfigError

        old = glob.glob(os.path.join(self.dump_dir, "tfdbg_events.*"))
        if old:
            raise ConfigError("debug.dump.dir", self.dump_dir,
                              "a new or empty folder: it already holds a Debugger V2 dump "
                              f"({os.path.basename(old[0])}, ...), and a second dump in the same folder cannot be "
                              "read back; remove it or pick another folder")

    def before_loop(self, step):
        if self.done or self.active or not self.window.starts_at(step):
            return
        import tensorflow as tf

        key = os.path.abspath(self.dump_dir)
        if key in _DUMPED_DIRS:
            logger.warning("debug.dump: this process already dumped into %s and TensorFlow cannot enable dumping "
                           "into the same folder twice; no dump for steps %d..%d (use another debug.dump.dir or "
                           "a fresh process)", self.dump_dir, self.window.first, self.window.last)
            self.done = True
            return
        if step > self.window.first - 1:
            logger.warning("debug.dump starts at step %d, not %d: training resumed inside the window",
                           step + 1, self.window.first)
        os.makedirs(self.dump_dir, exist_ok=True)
        tf.debugging.experimental.enable_dump_debug_info(
            self.dump_dir, tensor_debug_mode=self.mode, circular_buffer_size=self.circular_buffer_size,
            op_regex=self.op_regex)
        _DUMPED_DIRS.add(key)
        self.active = True
        # Retrace: only graphs traced while dumping is on are instrumented.
        self._original_loop = self.estimator.swap_train_loop()
        logger.info("Debugger V2 dump (%s) on from step %d into %s", self.mode, step + 1, self.dump_dir)

    def after_loop(self, step, logs):
        if self.active:
            self.dumped_steps.extend(range(step - int(logs.get("steps", 1)) + 1, step + 1))
            if step >= self.window.last:
                self._stop(step)

    def _stop(self, step: int) -> None:
        import tensorflow as tf

        self.active = False
        self.done = True
        if self._original_loop is not None:
            self.estimator.swap_train_loop(self._original_loop)
            self._original_loop = None
        tf.debugging.experimental.disable_dump_debug_info()
        if step < self.window.last:
            logger.warning("debug.dump stopped at step %d before the window's end (%d): training left the loop "
                           "(evaluation or the end of training); dumping cannot resume in this process",
                           step, self.window.last)
        logger.info("Debugger V2 dump of steps %s written to %s (open it with tensorboard --logdir %s)",
                    _span(self.dumped_steps), self.dump_dir, self.dump_dir)


def _span(steps: list[int]) -> str:
    return f"{steps[0]}..{steps[-1]}" if steps else "none"


def summarize_dump(dump_dir: str, *, loop_prefix: str = "__inference_loop") -> dict[str, Any]:
    """Reads a dump back with `DebugDataReader` and counts what it holds.

    Returns:
      {"executions": n, "loop_executions": n (calls of the train-loop function: one per
      dumped step), "execution_op_types": {type: count}, "graph_execution_traces": n,
      "trace_op_types": {type: count}, "nonfinite": [{op_name, op_type, nan, neg_inf,
      pos_inf}] for FULL_HEALTH/CONCISE_HEALTH/CURT_HEALTH traces holding NaN/Inf}.
    """
    from tensorflow.python.debug.lib import debug_events_reader

    out: dict[str, Any] = {"executions": 0, "loop_executions": 0, "execution_op_types": {},
                           "graph_execution_traces": 0, "trace_op_types": {}, "nonfinite": []}
    with debug_events_reader.DebugDataReader(dump_dir) as reader:
        reader.update()
        executions = reader.executions()
        out["executions"] = len(executions)
        for ex in executions:
            out["execution_op_types"][ex.op_type] = out["execution_op_types"].get(ex.op_type, 0) + 1
            if ex.op_type.startswith(loop_prefix):
                out["loop_executions"] += 1
        traces = reader.graph_execution_traces()
        out["graph_execution_traces"] = len(traces)
        for trace in traces:
            out["trace_op_types"][trace.op_type] = out["trace_op_types"].get(trace.op_type, 0) + 1
            values = getattr(trace, "debug_tensor_value", None)
            bad = _health_nonfinite(reader.tensor_debug_mode if hasattr(reader, "tensor_debug_mode") else None, values)
            if bad:
                out["nonfinite"].append({"op_name": trace.op_name, "op_type": trace.op_type, **bad})
    return out


def _health_nonfinite(mode, values) -> dict | None:
    """NaN/Inf counts from a FULL_HEALTH debug tensor value (
    [tensor_id, device_id, dtype, rank, size, -inf, +inf, nan, -finite, zero, +finite])."""
    if not values or len(values) != 11:
        return None
    neg_inf, pos_inf, nan = values[5], values[6], values[7]
    if neg_inf or pos_inf or nan:
        return {"nan": int(nan), "neg_inf": int(neg_inf), "pos_inf": int(pos_inf)}
    return None
