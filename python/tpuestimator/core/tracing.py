"""`tf.function`s built per Estimator (or per writer) without false "retracing" warnings.

TensorFlow's frequent-retracing detector keys a `tf.function` by its Python function's code
object. A factory that builds a fresh function for every Estimator (new variables, so a new
function is right) therefore looks like ONE function retracing after five jobs in a process
("5 out of the last 5 calls to <function ...> triggered tf.function retracing": the R console
showed it 16 times in 6 `tpu_train()` calls). Wrapping the Python function in a
`functools.partial` keys the detector by that object: each built function is counted on its
own, and a real retrace of one function still warns.
"""
from __future__ import annotations

import functools
from collections.abc import Callable


def device_function(fn: Callable, **kwargs):
    """`tf.function(fn, **kwargs)` keyed on its own for the retracing detector (module docstring)."""
    import tensorflow as tf

    keyed = functools.partial(fn)
    # The function's own name (graph and op names such as `__inference_loop_...` keep it);
    # never `__wrapped__`, which the detector would follow back to the shared code object.
    keyed.__name__ = getattr(fn, "__name__", "function")
    keyed.__qualname__ = getattr(fn, "__qualname__", keyed.__name__)
    keyed.__doc__ = fn.__doc__
    return tf.function(keyed, **kwargs)
