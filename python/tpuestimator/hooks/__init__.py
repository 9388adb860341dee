"""Hooks: host-side callbacks at loop boundaries (see `base.py`) and the built-in hooks.

The built-in hooks load on first use (`from tpuestimator.hooks import ProfilerHook`): the lazy
`__getattr__` imports only this package's modules (`_LAZY`, read by tests/python/test_architecture.py
as import edges); the core's hooks are imported by statement. None imports TensorFlow at import time. The debugging hooks (`DumpHook`, `NonFiniteReportHook`)
live in `tpuestimator.debug`, the layer above: import them from there.

Layer 4: may import the contracts, `core`, `data` and `runs`; never debug, serving, jobs,
cluster or commands. The hook protocol itself is `core.hooks` (the core calls it).
"""
from __future__ import annotations

import importlib
from typing import Any

from tpuestimator.core.hooks import CallableHook, Hook, HookList, as_hook
from tpuestimator.core.stopping import CheckpointSaverHook, EarlyStoppingHook  # core's, TensorFlow-free

_LAZY = {
    "LoggingHook": "tpuestimator.hooks.builtin",
    "SummaryHook": "tpuestimator.hooks.builtin",
    "ProgressCallbackHook": "tpuestimator.hooks.builtin",
    "ProgressBarHook": "tpuestimator.hooks.builtin",
    "StopAtStepHook": "tpuestimator.hooks.builtin",
    "TimingHook": "tpuestimator.hooks.builtin",
    "ProfilerHook": "tpuestimator.hooks.profiler",
    "HostCallHook": "tpuestimator.hooks.host_call",
    "WatchHook": "tpuestimator.hooks.watch",
    "HParamsHook": "tpuestimator.hooks.hparams",
}

__all__ = ["Hook", "HookList", "CallableHook", "as_hook", "LoggingHook", "SummaryHook", "ProgressCallbackHook",
           "ProgressBarHook", "StopAtStepHook", "TimingHook", "EarlyStoppingHook", "CheckpointSaverHook",
           "ProfilerHook", "HostCallHook", "WatchHook", "HParamsHook"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tpuestimator.hooks' has no attribute {name!r}")
