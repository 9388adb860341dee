"""`as_written(fn)`: the project's own graph code, called as written inside a `tf.function`.

tf.data and `tf.function` convert every Python function they trace with AutoGraph unless told not
to. The project's functions (the input pipeline's maps, the decoders, the table preprocessing, the
built-in heads, losses and metrics) are plain graph code: no Python `if`/`for` in them depends on a
tensor. Converting them cost a small table training about a fifth of its CPU (0.5-0.9 s per
pipeline built, of 3-4 s warm) and each new process about a second of its first training, for
nothing; a function that did need conversion fails loudly when traced, never silently. The device
loops and replica steps, the export's signatures and the summary writer are written the same way
(`tf.while_loop`, no Python loop on a tensor): with them, a process's first table training
converts nothing of ours (~2 CPU s of the first `tpu_train()` of an R session, of ~14). A user's
functions keep AutoGraph: called from our unconverted code, they go through `users_graph_code`,
which converts them as a converted caller would have. The one name for it, in layer 0 so that
`data`, `models` and `core` share it.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)


def as_written(fn: F) -> F:
    """`fn` unconverted by AutoGraph; a decorator too (of a function, a method or a class).

    A class is marked for its callable instances: AutoGraph converts an object's
    `type(obj).__call__` without looking for the mark on `__call__`, only on the object (which
    finds its class's), so a marked `__call__` alone is converted anyway, with every method it
    calls. A function gets the mark `tf.autograph.experimental.do_not_convert` leaves on what it returns
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


def users_graph_code(fn: F) -> F:
    """`fn`, a function the user may have written (a model spec's loss, metric or prediction
    function, a metric's methods), converted by AutoGraph when called inside a traced function
    of ours that is `as_written`: what it would have been were ours converted, which converts
    what it calls. `as_written` functions and Keras's and TensorFlow's own come back as they
    are (AutoGraph leaves them unconverted either way). Outside a `tf.function` `fn` runs as written.
    """
    if hasattr(fn, "autograph_info__"):
        return fn
    import tensorflow as tf

    autograph = tf.__internal__.autograph
    return autograph.tf_convert(fn, autograph.control_status_ctx(), convert_by_default=False)
