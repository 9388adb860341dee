"""Built-in hooks used by every job: fixed-column logging, TensorBoard summaries, progress."""
from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from tpuestimator.core.hooks import Hook
from tpuestimator.core.tracing import device_function
from tpuestimator.system.graph_code import as_written

logger = logging.getLogger(__name__)


def format_columns(kind: str, step: int, values: Mapping[str, Any]) -> str:
    """`train | step:   1200 | loss: 0.3100 | steps/sec: 512.3` (orbit's fixed columns)."""
    parts = [f"{kind:<5}", f"step: {step:>7d}"]
    for name, value in values.items():
        if isinstance(value, float):
            parts.append(f"{name}: {value:.4f}" if abs(value) < 100 else f"{name}: {value:.1f}")
        else:
            parts.append(f"{name}: {value}")
    return " | ".join(parts)


def held_out_loss(metrics: Mapping[str, Any]) -> float | None:
    """An evaluation's loss as a float, or None when it has none."""
    value = metrics.get("loss")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class LoggingHook(Hook):
    """Logs step, loss, steps/s and examples/s every `every_n_loops` loops, and eval metrics.

    Once an evaluation ran during training, each train line shows its loss (`eval loss`, the
    latest evaluation's) beside the training loss: a training loss that falls while the
    held-out one rises (overfitting, a bad learning rate) shows on the line people watch."""

    def __init__(self, every_n_loops: int = 1, log: logging.Logger | None = None):
        self.every_n_loops = every_n_loops
        self.log = log or logger
        self._loops = 0
        self._eval_loss: float | None = None

    def after_loop(self, step, logs):
        self._loops += 1
        if self._loops % self.every_n_loops:
            return
        cols = {"loss": logs.get("loss")}
        if self._eval_loss is not None:
            cols["eval loss"] = self._eval_loss
        cols.update({"steps/sec": logs.get("steps_per_sec"), "examples/sec": logs.get("examples_per_sec")})
        cols.update({k: v for k, v in logs.items() if k not in ("loss", "steps", "steps_per_sec", "examples_per_sec")})
        self.log.info(format_columns("train", step, cols))

    def after_eval(self, step, metrics):
        self._eval_loss = held_out_loss(metrics)
        self.log.info(format_columns("eval", step, {k: v for k, v in metrics.items() if k != "global_step"}))


class ScalarRowsWriter:
    """Writes rows of (step, {name: value}) TensorBoard scalars: a run of rows sharing the same
    names with one `tf.function` call, or, when it holds at most `EAGER_MAX_SCALARS` values,
    with eager summary ops. Each eager op costs ~0.3 ms; tracing the function costs ~0.15 CPU s
    per writer and set of names, most of a short job's two writers (train, eval), which flush
    a few rows at each evaluation."""

    EAGER_MAX_SCALARS = 256

    def __init__(self, writer):
        self.writer = writer
        self._fns: dict = {}

    def write(self, rows) -> None:
        import tensorflow as tf

        i = 0
        while i < len(rows):
            names = tuple(rows[i][1])
            j = i
            while j < len(rows) and tuple(rows[j][1]) == names:
                j += 1
            if (j - i) * len(names) <= self.EAGER_MAX_SCALARS and names not in self._fns:
                self._write_eagerly(rows[i:j])
                i = j
                continue
            fn = self._fns.get(names)
            if fn is None:
                # One function per writer and set of names: tracing.device_function keeps the
                # next job's writers from counting as retraces of this one.
                fn = device_function(_scalar_rows_writer(self.writer, names),
                                     input_signature=[tf.TensorSpec([None], tf.int64),
                                                      tf.TensorSpec([None, len(names)], tf.float32)])
                self._fns[names] = fn
            chunk = rows[i:j]
            fn(tf.constant([s for s, _ in chunk], tf.int64),
               tf.constant([[float(v) for v in values.values()] for _, values in chunk], tf.float32))
            i = j

    def _write_eagerly(self, rows) -> None:
        """What the traced function writes (the same tags, float32 values, int64 steps, scalar
        metadata), one summary op at a time."""
        import tensorflow as tf

        meta = _scalar_metadata()
        with self.writer.as_default():
            for step, values in rows:
                for name, value in values.items():
                    tf.summary.write(tag=name, tensor=tf.constant(float(value), tf.float32),
                                     step=tf.constant(step, tf.int64), metadata=meta)


class SummaryHook(Hook):
    """Writes TensorBoard scalars: train loss, learning rate, steps/s, examples/s and the
    model's `report` values (in `<logdir>/train`, one point per loop) and eval metrics (in
    `<logdir>/eval`).

    The loop values are kept on the host and written every `flush_secs` seconds in ONE call
    of a `tf.function` (eager summary ops cost ~0.1-2 ms per loop on a busy host; this keeps
    the hook's per-loop cost to a list append), and always before an evaluation, at the end
    of training and when training raises (so a failed run's curves are complete).
    """

    def __init__(self, logdir: str, flush_secs: float = 5.0):
        self.logdir = logdir
        self.flush_secs = flush_secs
        self._train = None
        self._eval = None
        self._write_fns: dict = {}
        self._pending: list[tuple[int, dict]] = []
        self._last_write = time.monotonic()

    def _writer(self, kind: str):
        import tensorflow as tf

        attr = f"_{kind}"
        if getattr(self, attr) is None:
            setattr(self, attr, tf.summary.create_file_writer(f"{self.logdir}/{kind}"))
        return getattr(self, attr)

    def _write(self, kind: str, rows: list[tuple[int, dict]]) -> None:
        if kind not in self._write_fns:
            self._write_fns[kind] = ScalarRowsWriter(self._writer(kind))
        self._write_fns[kind].write(rows)

    def _flush_train(self) -> None:
        if self._pending:
            rows, self._pending = self._pending, []
            # The learning rate is read at write time: a schedule's value at each step; a
            # fixed rate (a variable) once per write.
            fixed = None
            for step, values in rows:
                lr = self._learning_rate(step, fixed)
                if lr is not None:
                    values["learning_rate"] = lr[0]
                    fixed = lr if lr[1] else None
            self._write("train", rows)
        self._last_write = time.monotonic()

    def after_loop(self, step, logs):
        values = {name: value for name, value in logs.items()
                  if name != "steps" and isinstance(value, (int, float)) and not isinstance(value, bool)}
        if values:
            self._pending.append((step, values))
        if time.monotonic() - self._last_write >= self.flush_secs:
            self._flush_train()

    def _learning_rate(self, step: int, fixed: tuple | None = None):
        """(value, is_fixed) of the learning rate at `step`, or None."""
        if fixed is not None:
            return fixed
        optimizer = getattr(getattr(self.estimator, "spec", None), "optimizer", None)
        if optimizer is None:
            return None
        inner = getattr(optimizer, "inner_optimizer", optimizer)
        lr = getattr(inner, "learning_rate", None)
        try:
            return (float(lr(step)), False) if callable(lr) else (float(lr), True)
        except (TypeError, ValueError, RuntimeError):
            return None

    def after_eval(self, step, metrics):
        self._flush_train()
        values = {name: value for name, value in metrics.items()
                  if name not in ("global_step",) and isinstance(value, (int, float)) and not isinstance(value, bool)}
        if values:
            self._write("eval", [(step, values)])
        self._writer("eval").flush()

    def end(self, step, logs):
        self._flush_train()
        for writer in (self._train, self._eval):
            if writer is not None:
                writer.flush()

    def on_exception(self, step, exc):
        self.end(step, {})


class ProgressCallbackHook(Hook):
    """Forwards progress to a callable `progress(event, info)`: how R shows live progress
    (reticulate 1.28 holds Python's stdout until a call returns)."""

    def __init__(self, progress: Callable[[str, dict], Any], max_steps: int | None = None):
        self.progress = progress
        self.max_steps = max_steps
        self._eval_loss: float | None = None

    def begin(self, step, info):
        # The job's total (`train.max_steps`), else the controller's target.
        self.progress("begin", {"step": step, "max_steps": self.max_steps or info.get("max_steps")})

    def after_loop(self, step, logs):
        # `eval_loss`: the latest evaluation's loss, once one ran (R prints it beside the loss)
        held_out = {} if self._eval_loss is None else {"eval_loss": self._eval_loss}
        self.progress("loop", {"step": step, "max_steps": self.max_steps, **dict(logs), **held_out})

    def after_eval(self, step, metrics):
        self._eval_loss = held_out_loss(metrics)
        self.progress("eval", {"step": step, "metrics": dict(metrics)})

    def end(self, step, logs):
        self.progress("end", {"step": step, **dict(logs)})


class ProgressBarHook(Hook):
    """A tqdm progress bar (steps, steps/s, loss, the latest evaluation's loss, ETA) on a TTY;
    nothing otherwise.

    Progress bars print, so only the CLI adds this hook.
    """

    def __init__(self, max_steps: int | None, stream=None):
        self.max_steps = max_steps
        self.stream = stream or sys.stderr
        self._bar = None
        self._eval_loss: float | None = None

    def begin(self, step, info):
        if not getattr(self.stream, "isatty", lambda: False)():
            return
        from tqdm import tqdm

        if self._bar is None:
            self._bar = tqdm(total=self.max_steps, initial=step, unit="step", file=self.stream, dynamic_ncols=True)
        self._last = step

    def after_loop(self, step, logs):
        if self._bar is not None:
            self._bar.update(step - self._last)
            self._last = step
            held_out = {} if self._eval_loss is None else {"eval loss": f"{self._eval_loss:.4f}"}
            self._bar.set_postfix(loss=f"{logs.get('loss', float('nan')):.4f}", **held_out,
                                  **{"steps/s": f"{logs.get('steps_per_sec', 0):.1f}"})

    def after_eval(self, step, metrics):
        self._eval_loss = held_out_loss(metrics)
        if self._bar is not None:
            self._bar.write(", ".join(f"{k}={v:.4f}" for k, v in metrics.items() if isinstance(v, float)))

    def close(self):
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class StopAtStepHook(Hook):
    """Stops training once the global step reaches `last_step` (at a loop boundary)."""

    def __init__(self, last_step: int):
        self.last_step = last_step

    def after_loop(self, step, logs):
        if step >= self.last_step:
            self.stop_training = True


class TimingHook(Hook):
    """Measures wall time per loop on the host (used by benchmarks and the run record)."""

    def __init__(self):
        self.loop_times: list[float] = []
        self._t = None

    def before_loop(self, step):
        self._t = time.perf_counter()

    def after_loop(self, step, logs):
        if self._t is not None:
            self.loop_times.append(time.perf_counter() - self._t)


def _scalar_metadata():
    """A scalar summary's metadata (what `tf.summary.scalar` attaches)."""
    from tensorboard.plugins.scalar import metadata as scalar_metadata

    return scalar_metadata.create_summary_metadata(display_name=None, description=None)


def _scalar_rows_writer(writer, names: tuple):
    """`write_rows(steps, vals)`: rows of scalars (one column per name) into `writer`."""
    import tensorflow as tf

    meta = _scalar_metadata()

    @as_written  # a tf.while_loop as written: no AutoGraph conversion to trace (graph_code)
    def write_rows(steps, vals):
        def write_row(k):
            for c, name in enumerate(names):
                # tf.summary.write keeps the tag as given (tf.summary.scalar would prefix
                # the loop's name scope); same metadata as a scalar summary.
                tf.summary.write(tag=name, tensor=vals[k, c], step=steps[k], metadata=meta)
            return k + 1

        with writer.as_default():
            tf.while_loop(lambda k: k < tf.shape(steps)[0], write_row, [tf.constant(0)])

    return write_rows
