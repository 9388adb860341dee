"""Coming from TPUEstimator: adapters that keep a ported model function's TF1 shape.

docs/MIGRATING.md maps every TPUEstimator concept to its equivalent; this package holds the
translations that are mechanical:

- `eval_metrics(metric_fn, tensors)`: `TPUEstimatorSpec.eval_metrics` as `ModelSpec.metrics`,
  with `porting.metrics` standing in for `tf.metrics` (metric_fn.py, metrics.py);
- `HostCall(host_call_fn, tensors)`: `TPUEstimatorSpec.host_call` on `HostCallHook` (host_call.py);
- `as_loop_hook(hook)`, `SessionRunHook`, `SessionRunArgs`: TF1 session hooks at loop
  boundaries (session_hooks.py);
- `serving_input(receiver_fn)`, `placeholder`, `ServingInputReceiver` and TF1's two receiver
  builders: `export_savedmodel(serving_input_receiver_fn)` as export signatures (export.py);
- `tf1_leftovers`: what `tpuestimator check` reports in a model module still written for TF1.

Importing this package does not import TensorFlow; the names load their module when used.

Layer 6 (beside `serving`): may import the contracts, `core`, `data`, `runs`, `hooks`, `debug`
and `serving`; never jobs, cluster or commands (`jobs.check` imports `tf1_leftovers`).
"""
from __future__ import annotations

from importlib import import_module

_EXPORTS = {
    "eval_metrics": "tpuestimator.porting.metric_fn",
    "HostCall": "tpuestimator.porting.host_call",
    "as_loop_hook": "tpuestimator.porting.session_hooks",
    "LoopSessionRunHook": "tpuestimator.porting.session_hooks",
    "SessionRunHook": "tpuestimator.porting.session_hooks",
    "SessionRunArgs": "tpuestimator.porting.session_hooks",
    "SessionRunContext": "tpuestimator.porting.session_hooks",
    "SessionRunValues": "tpuestimator.porting.session_hooks",
    "serving_input": "tpuestimator.porting.export",
    "placeholder": "tpuestimator.porting.export",
    "ServingInputReceiver": "tpuestimator.porting.export",
    "TensorServingInputReceiver": "tpuestimator.porting.export",
    "build_raw_serving_input_receiver_fn": "tpuestimator.porting.export",
    "build_parsing_serving_input_receiver_fn": "tpuestimator.porting.export",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tpuestimator.porting' has no attribute {name!r}")
    return getattr(import_module(module), name)
