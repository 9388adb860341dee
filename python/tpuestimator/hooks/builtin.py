"""Built-in hooks used by every job: fixed-column logging, TensorBoard summaries, progress."""
from __future__ import annotations

import logging
import sys
import time
from typing import Any, Callable, Mapping

from tpuestimator.hooks.base import Hook

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


class LoggingHook(Hook):
    """Logs step, loss, steps/s and examples/s every `every_n_loops` loops, and eval metrics."""

    def __init__(self, every_n_loops: int = 1, log: logging.Logger | None = None):
        self.every_n_loops = every_n_loops
        self.log = log or logger
        self._loops = 0

    def after_loop(self, step, logs):
        self._loops += 1
        if self._loops % self.every_n_loops:
            return
        cols = {"loss": logs.get("loss"), "steps/sec": logs.get("steps_per_sec"),
                "examples/sec": logs.get("examples_per_sec")}
        cols.update({k: v for k, v in logs.items() if k not in ("loss", "steps", "steps_per_sec", "examples_per_sec")})
        self.log.info(format_columns("train", step, cols))

    def after_eval(self, step, metrics):
        self.log.info(format_columns("eval", step, {k: v for k, v in metrics.items() if k != "global_step"}))


class SummaryHook(Hook):
    """Writes TensorBoard scalars: train loss, learning rate, steps/s, examples/s (in
    `<logdir>/train`) and eval metrics (in `<logdir>/eval`), at loop boundaries."""

    def __init__(self, logdir: str):
        self.logdir = logdir
        self._train = None
        self._eval = None

    def _writer(self, kind: str):
        import tensorflow as tf

        attr = f"_{kind}"
        if getattr(self, attr) is None:
            setattr(self, attr, tf.summary.create_file_writer(f"{self.logdir}/{kind}"))
        return getattr(self, attr)

    def after_loop(self, step, logs):
        import tensorflow as tf

        with self._writer("train").as_default(step=step):
            for name, value in logs.items():
                if name != "steps" and isinstance(value, (int, float)):
                    tf.summary.scalar(name, value)
            lr = self._learning_rate(step)
            if lr is not None:
                tf.summary.scalar("learning_rate", lr)

    def _learning_rate(self, step: int):
        optimizer = getattr(getattr(self.estimator, "spec", None), "optimizer", None)
        if optimizer is None:
            return None
        inner = getattr(optimizer, "inner_optimizer", optimizer)
        lr = getattr(inner, "learning_rate", None)
        try:
            return float(lr(step)) if callable(lr) else float(lr)
        except (TypeError, ValueError):
            return None

    def after_eval(self, step, metrics):
        import tensorflow as tf

        with self._writer("eval").as_default(step=step):
            for name, value in metrics.items():
                if name not in ("global_step",) and isinstance(value, (int, float)):
                    tf.summary.scalar(name, value)
            self._eval.flush()

    def end(self, step, logs):
        for writer in (self._train, self._eval):
            if writer is not None:
                writer.flush()


class ProgressCallbackHook(Hook):
    """Forwards progress to a callable `progress(event, info)`: how R shows live progress
    (reticulate 1.28 holds Python's stdout until a call returns)."""

    def __init__(self, progress: Callable[[str, dict], Any], max_steps: int | None = None):
        self.progress = progress
        self.max_steps = max_steps

    def begin(self, step, info):
        self.progress("begin", {"step": step, "max_steps": info.get("max_steps") or self.max_steps})

    def after_loop(self, step, logs):
        self.progress("loop", {"step": step, "max_steps": self.max_steps, **dict(logs)})

    def after_eval(self, step, metrics):
        self.progress("eval", {"step": step, "metrics": dict(metrics)})

    def end(self, step, logs):
        self.progress("end", {"step": step, **dict(logs)})


class ProgressBarHook(Hook):
    """A tqdm progress bar (steps, steps/s, loss, ETA) on a TTY; nothing otherwise.

    Progress bars print, so only the CLI adds this hook.
    """

    def __init__(self, max_steps: int | None, stream=None):
        self.max_steps = max_steps
        self.stream = stream or sys.stderr
        self._bar = None

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
            self._bar.set_postfix(loss=f"{logs.get('loss', float('nan')):.4f}",
                                  **{"steps/s": f"{logs.get('steps_per_sec', 0):.1f}"})

    def after_eval(self, step, metrics):
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
