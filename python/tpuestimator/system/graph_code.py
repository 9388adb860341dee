"""`as_written(fn)`: the project's own graph code, called as written inside a `tf.function`.

tf.data and `tf.function` convert every Python function they trace with AutoGraph unless told not
to. The project's functions (the input pipeline's maps, the decoders, the table preprocessing, the
built-in heads, losses and metrics) are plain graph code: no Python `if`/`for` in them depends on a
tensor. Converting them cost a small table training about a fifth of its CPU (0.5-0.9 s per
pipeline built, of 3-4 s warm) and each new process about a second of its first training, for
nothing; a function that did need conversion fails loudly when traced, never silently. A user's
functions keep AutoGraph. The one name for it, in layer 0 so that `data` and `models` share it.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)


def as_written(fn: F) -> F:
    """`fn` unconverted by AutoGraph; a decorator too.

    A function gets the mark `tf.autograph.experimental.do_not_convert` leaves on what it returns
    (`autograph_info__`), set on the function itself: AutoGraph then calls it as written, and no
    TensorFlow is imported, so modules that must not load it (`spec`) can decorate at import. What
    takes no attribute (a bound method) is wrapped by `do_not_convert` itself. Were the mark ever
    ignored, AutoGraph would convert the function as before: the same graph, slower to build.
    """
    try:
        fn.autograph_info__ = frozenset()
        return fn
    except (AttributeError, TypeError):
        import tensorflow as tf

        return tf.autograph.experimental.do_not_convert(fn)
