"""`ProfilerHook`: the TensorFlow profiler over training steps a..b (`debug.profile_steps`).

Steps are counted from 1: step k is the k-th training step, after which the global step is
k (as in Keras' `profile_batch`). The hook asks the Estimator for loop boundaries at global
steps a-1 and b (`steps_to_boundary`), so exactly steps a..b run inside the profile however
long `iterations_per_loop` is; the other loops keep their length. The trace lands in
`<logdir>/plugins/profile/<timestamp>/` where TensorBoard's Profile tab reads it (install
`tensorboard-plugin-profile` to view it).
"""
from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from tpuestimator.core.hooks import Hook

logger = logging.getLogger(__name__)


def step_window(steps: Sequence[int], field: str) -> tuple[int, int]:
    """Validates `[a, b]` (1-based, inclusive; 0 is read as 1) and returns (a, b)."""
    from tpuestimator.errors import ConfigError

    if steps is None or len(steps) != 2 or not all(isinstance(s, int) and not isinstance(s, bool) for s in steps):
        raise ConfigError(field, steps, "two step numbers [first, last], e.g. [5, 7]")
    a, b = max(1, int(steps[0])), int(steps[1])
    if b < a:
        raise ConfigError(field, list(steps), f"[first, last] with first <= last, e.g. [{b}, {a}]")
    return a, b


class StepWindow:
    """Loop-boundary arithmetic shared by hooks that switch something on for steps a..b.

    `steps_to_boundary(step)` is what the Estimator calls before each loop: the number of
    steps the next loop may run so that a boundary falls at global step a-1 and at b (with
    `per_step=True`, at every step inside the window: one device call per step).
    """

    def __init__(self, first: int, last: int, *, per_step: bool = False):
        self.first, self.last, self.per_step = first, last, per_step

    def steps_to_boundary(self, step: int) -> int | None:
        if step < self.first - 1:
            return self.first - 1 - step
        if step < self.last:
            return 1 if self.per_step else self.last - step
        return None

    def starts_at(self, step: int) -> bool:
        """Whether the loop starting at global step `step` runs inside the window."""
        return self.first - 1 <= step < self.last


class StepWindowHook(Hook):
    """Base of hooks that switch something on for steps a..b: whatever is on is switched off
    when training leaves its loops (an evaluation, the end) or raises."""

    active = False

    def _stop(self, step: int) -> None:
        raise NotImplementedError

    def before_eval(self, step):
        if self.active:
            self._stop(step)

    def end(self, step, logs):
        if self.active:
            self._stop(step)

    def on_exception(self, step, exc):
        if self.active:
            self._stop(step)


class ProfilerHook(StepWindowHook):
    """Profiles training steps `first..last` with `tf.profiler.experimental`.

    Args:
      logdir: TensorBoard log folder (the trace goes to `<logdir>/plugins/profile/`).
      steps: `[first, last]`, 1-based and inclusive.
    """

    def __init__(self, logdir: str, steps: Sequence[int], *, field: str = "debug.profile_steps"):
        first, last = step_window(steps, field)
        self.logdir = os.fspath(logdir)
        self.window = StepWindow(first, last)
        self.active = False
        self.profiled: tuple[int, int] | None = None  # (first step, last step) actually profiled
        self._start_step: int | None = None

    def steps_to_boundary(self, step: int) -> int | None:
        return self.window.steps_to_boundary(step)

    def before_loop(self, step):
        if self.active or self.profiled is not None or not self.window.starts_at(step):
            return
        import tensorflow as tf

        if step > self.window.first - 1:
            logger.warning("profiling starts at step %d, not %d: training resumed inside debug.profile_steps",
                           step + 1, self.window.first)
        os.makedirs(self.logdir, exist_ok=True)
        try:
            tf.profiler.experimental.start(self.logdir)
        except Exception as exc:  # noqa: BLE001 - another profiler session running must not stop training
            logger.warning("could not start the profiler: %s", exc)
            self.profiled = (0, 0)
            return
        self.active = True
        self._start_step = step + 1
        logger.info("profiler on from step %d (trace in %s)", step + 1, os.path.join(self.logdir, "plugins", "profile"))

    def after_loop(self, step, logs):
        if self.active and step >= self.window.last:
            self._stop(step)

    def _stop(self, step: int) -> None:
        import tensorflow as tf

        self.active = False
        try:
            tf.profiler.experimental.stop()
        except Exception as exc:  # noqa: BLE001
            logger.warning("could not stop the profiler: %s", exc)
            return
        self.profiled = (self._start_step or 0, step)
        logger.info("profiled steps %d..%d into %s", self.profiled[0], step,
                    os.path.join(self.logdir, "plugins", "profile"))
