"""TF1 `SessionRunHook`s (`begin`, `after_create_session`, `before_run`, `after_run`, `end`)
run at the Estimator's loop boundaries.

The difference: there is no Session and no per-step `session.run`. `before_run` is called
before each device loop and `after_run` after it, i.e. once per `iterations_per_loop` steps,
which is what TPUEstimator itself did on a TPU. `before_run` asks for values BY NAME
(`SessionRunArgs("loss")`, `SessionRunArgs({"step": "global_step", "loss": "loss"})`): the
loop's mean `loss`, `global_step`, `steps`, `steps_per_sec`, `examples_per_sec` and every
`ModelSpec.report` name. Graph tensors cannot be fetched (there is no graph); a value needed
per step goes in `ModelSpec.report` and is read per step through `HostCallHook`.
`run_context.request_stop()` stops training after the current loop. `session` and `coord`
are None.

    estimator.train(input_fn, max_steps=..., hooks=[as_loop_hook(MyTF1Hook())])

`MyTF1Hook` may subclass `tf.compat.v1.train.SessionRunHook` (it still exists) or
`porting.SessionRunHook` (the same no-op methods, without TensorFlow's import).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from tpuestimator.core.hooks import Hook


class SessionRunArgs(NamedTuple):
    """What `before_run` asks for: `fetches` are names (a str, a list/tuple or dict of them)."""

    fetches: Any
    feed_dict: Any = None
    options: Any = None


class SessionRunValues(NamedTuple):
    """What `after_run` receives: `results` shaped like the fetches, values of the loop."""

    results: Any
    options: Any = None
    run_metadata: Any = None


class SessionRunContext:
    """TF1's run context: `request_stop()` ends training after the current loop."""

    def __init__(self, original_args: SessionRunArgs, session=None):
        self.original_args = original_args
        self.session = session
        self._stop_requested = False

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested

    def request_stop(self) -> None:
        self._stop_requested = True


class SessionRunHook:
    """TF1's hook interface with no-op methods (subclass it, or TensorFlow's own class)."""

    def begin(self):
        """Training is about to start."""

    def after_create_session(self, session, coord):
        """Called once after `begin` (session and coord are None)."""

    def before_run(self, run_context):
        """Before each device loop; return `SessionRunArgs(names)` to receive values."""
        return None

    def after_run(self, run_context, run_values):
        """After each device loop, with the values asked for."""

    def end(self, session):
        """Training ended (session is None)."""


class LoopSessionRunHook(Hook):
    """A `tpuestimator.hooks.Hook` running a TF1 SessionRunHook at loop boundaries."""

    def __init__(self, hook: Any):
        missing = [m for m in ("begin", "before_run", "after_run", "end") if not callable(getattr(hook, m, None))]
        if missing:
            raise TypeError(f"{type(hook).__name__} is not SessionRunHook-shaped: it lacks {', '.join(missing)}.")
        self.hook = hook
        self._context: SessionRunContext | None = None
        self._fetches: Any = None

    def begin(self, step, info):
        self.hook.begin()
        after_create = getattr(self.hook, "after_create_session", None)
        if callable(after_create):
            after_create(None, None)

    def before_loop(self, step):
        context = SessionRunContext(SessionRunArgs(fetches=None))
        requested = self.hook.before_run(context)
        fetches = None
        if requested is not None:
            if not isinstance(requested, SessionRunArgs) and type(requested).__name__ != "SessionRunArgs":
                raise TypeError(f"{type(self.hook).__name__}.before_run must return SessionRunArgs or None. "
                                f"Received: {requested!r}")
            if getattr(requested, "feed_dict", None):
                raise ValueError(f"{type(self.hook).__name__}.before_run passes a feed_dict: there are no feeds in "
                                 "TensorFlow 2; put the value in the input function or the model.")
            fetches = requested.fetches
        self._context, self._fetches = context, fetches

    def after_loop(self, step, logs):
        if self._context is None:  # before_loop did not run (a hook added mid-training)
            return
        available = {"global_step": step, **dict(logs)}
        results = None if self._fetches is None else _resolve(self._fetches, available, type(self.hook).__name__)
        self.hook.after_run(self._context, SessionRunValues(results=results))
        if self._context.stop_requested:
            self.stop_training = True

    def end(self, step, logs):
        self.hook.end(None)


def as_loop_hook(hook: Any) -> LoopSessionRunHook:
    """Wraps a TF1 SessionRunHook (or anything with its methods) for `train(hooks=...)`."""
    return hook if isinstance(hook, LoopSessionRunHook) else LoopSessionRunHook(hook)


def _resolve(fetches, available: Mapping[str, Any], owner: str):
    if isinstance(fetches, str):
        if fetches not in available:
            raise ValueError(f"{owner}.before_run fetches {fetches!r}, which no loop reports; available: "
                             f"{', '.join(sorted(available))} (add a value with ModelSpec.report).")
        return available[fetches]
    if isinstance(fetches, Mapping):
        return {key: _resolve(value, available, owner) for key, value in fetches.items()}
    if isinstance(fetches, (list, tuple)):
        return type(fetches)(_resolve(value, available, owner) for value in fetches)
    raise ValueError(f"{owner}.before_run fetches {fetches!r}: graph tensors cannot be fetched in TensorFlow 2 "
                     f"(there is no Session); fetch a name instead: {', '.join(sorted(available))} "
                     "(tf.train.get_global_step() -> 'global_step').")
