"""Hooks: host-side callbacks at loop boundaries (see `base.py`) and the built-in hooks."""
from tpuestimator.hooks.base import CallableHook, Hook, HookList, as_hook

__all__ = ["Hook", "HookList", "CallableHook", "as_hook"]
