"""The hook API: host-side callbacks at loop boundaries and around eval and export.

Hooks never run inside the device loop: the host wakes once per `iterations_per_loop`
steps, so a hook costs nothing per step. `logs` holds the loop's device results (`loss`,
anything the model function asked to `report`, `steps_per_sec`, `examples_per_sec`). A hook
stops training by setting its own `self.stop_training = True` (a flag, never an exception),
as Keras callbacks do (`self.model.stop_training`): the training loop reads the hooks' flags
through `HookList.stop_training` after each loop, and `Estimator.train` reports the request
in `Estimator.stop_training`, which `train_and_evaluate` reads. No hook writes another
object's fields.

Every capability the training loop uses is declared on `Hook` with a default, as Keras
declares every callback method on `keras.callbacks.Callback`: a hook overrides what it
needs and nothing is found by duck typing.
"""
from __future__ import annotations

import functools
import logging
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

logger = logging.getLogger(__name__)


class Hook:
    """Base class with a no-op method per event.

    Attributes:
      estimator: the Estimator running this hook, set before `begin`; held weakly (None once
        that Estimator is gone), see `estimator`.
      stop_training: the hook's declared stop flag: set it to True to stop after the current
        loop (the training loop reads it through `HookList.stop_training`).
    """

    stop_training: bool = False
    # True: train with the recording loop and fill `estimator.per_step_values` after each
    # loop (each step's mean loss and report values; `HostCallHook`). Costs device work.
    wants_per_step_values: bool = False

    @property
    def estimator(self) -> Any:
        """The Estimator running this hook (set before `begin`); None before, or once that
        Estimator is gone. Held weakly: a hook that the model function keeps (a porting
        `HostCall`) or that sits in a reference cycle of its own (a bound method of itself,
        a closure over itself) would otherwise keep the Estimator, and its input iterators,
        until a garbage collection, whose freeing of them can stall (`core.workarounds`)."""
        ref = self.__dict__.get("_estimator_ref")
        return ref() if ref is not None else None

    @estimator.setter
    def estimator(self, estimator: Any) -> None:
        if estimator is None:
            ref = None
        else:
            try:
                ref = weakref.ref(estimator)
            except TypeError:  # no weak references (a plain stand-in object): held
                ref = functools.partial(_identity, estimator)
        self.__dict__["_estimator_ref"] = ref

    def steps_to_boundary(self, step: int) -> int | None:
        """At most how many steps the next loop (starting at `step`) may run, so that a loop
        boundary falls where this hook needs one (profiler, dumps); None: no constraint."""
        return None

    def close(self) -> None:
        """The job is over: release files, writers, profilers."""

    def begin(self, step: int, info: Mapping[str, Any]) -> None:
        """Training starts at global step `step`. `info` has max_steps, model_dir, num_replicas, ..."""

    def before_loop(self, step: int) -> None:
        """A device loop is about to run from `step`."""

    def after_loop(self, step: int, logs: Mapping[str, Any]) -> None:
        """A device loop ended at global step `step` with these results."""

    def before_eval(self, step: int) -> None:
        """An evaluation at global step `step` is about to run: under `train_and_evaluate`
        training pauses here, its checkpoint at `step` on disk (what a hook switched on for
        training steps goes off here). Not forwarded to callables (`CallableHook`)."""

    def after_eval(self, step: int, metrics: Mapping[str, Any]) -> None:
        """An evaluation at global step `step` produced `metrics`."""

    def after_export(self, step: int, export_dir: str) -> None:
        """A SavedModel was exported."""

    def end(self, step: int, logs: Mapping[str, Any]) -> None:
        """Training ended (normally or by a stop flag)."""

    def on_exception(self, step: int, exc: BaseException) -> None:
        """Training is about to raise `exc`."""


class CallableHook(Hook):
    """Adapts a plain callable `fn(event, info)` (a Python or R function) to the hook API.

    Events: `begin`, `before_loop`, `after_loop`, `after_eval`, `after_export`, `end`,
    `on_exception` (not `before_eval`: R hooks see the events they always saw). `info` is a
    dict with `step` and the event's payload (`logs` merged in for after_loop, `metrics` for
    after_eval). The callable stops training by returning the string "stop"
    or a dict with `{"stop": True}`.
    """

    def __init__(self, fn: Callable[[str, dict], Any], name: str | None = None):
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "hook")

    def _call(self, event: str, info: dict) -> None:
        result = self.fn(event, info)
        if result == "stop" or (isinstance(result, Mapping) and result.get("stop")):
            self.stop_training = True

    def begin(self, step, info):
        self._call("begin", {"step": step, **dict(info)})

    def before_loop(self, step):
        self._call("before_loop", {"step": step})

    def after_loop(self, step, logs):
        self._call("after_loop", {"step": step, **dict(logs)})

    def after_eval(self, step, metrics):
        self._call("after_eval", {"step": step, "metrics": dict(metrics)})

    def after_export(self, step, export_dir):
        self._call("after_export", {"step": step, "export_dir": export_dir})

    def end(self, step, logs):
        self._call("end", {"step": step, **dict(logs)})

    def on_exception(self, step, exc):
        self._call("on_exception", {"step": step, "error": f"{type(exc).__name__}: {exc}"})


def as_hook(obj: Any) -> Hook:
    if isinstance(obj, Hook):
        return obj
    if callable(obj):
        return CallableHook(obj)
    raise TypeError(f"A hook must be a tpuestimator.hooks.Hook or a callable fn(event, info). Received: {obj!r}")


class HookList(Hook):
    """Calls every hook in order; `stop_training` is true once any hook asked to stop."""

    def __init__(self, hooks: Iterable[Any] = ()):
        self.hooks = [as_hook(h) for h in hooks]

    def set_estimator(self, estimator) -> None:
        for h in self.hooks:
            h.estimator = estimator

    @property
    def stop_training(self) -> bool:  # type: ignore[override]
        return any(h.stop_training for h in self.hooks)

    @property
    def wants_per_step_values(self) -> bool:  # type: ignore[override]
        return any(h.wants_per_step_values for h in self.hooks)

    def steps_to_boundary(self, step: int) -> int | None:
        caps = [int(c) for c in (h.steps_to_boundary(step) for h in self.hooks) if c]
        return min(caps) if caps else None

    def close(self) -> None:
        for h in self.hooks:
            h.close()

    def begin(self, step, info):
        for h in self.hooks:
            h.begin(step, info)

    def before_loop(self, step):
        for h in self.hooks:
            h.before_loop(step)

    def after_loop(self, step, logs):
        for h in self.hooks:
            h.after_loop(step, logs)

    def before_eval(self, step):
        for h in self.hooks:
            h.before_eval(step)

    def after_eval(self, step, metrics):
        for h in self.hooks:
            h.after_eval(step, metrics)

    def after_export(self, step, export_dir):
        for h in self.hooks:
            h.after_export(step, export_dir)

    def end(self, step, logs):
        for h in self.hooks:
            h.end(step, logs)

    def on_exception(self, step, exc):
        for h in self.hooks:
            try:
                h.on_exception(step, exc)
            except Exception:  # a failing hook must not hide the original error
                logger.exception("hook %r failed in on_exception", h)


def _identity(value: Any) -> Any:
    return value
