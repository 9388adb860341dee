"""Work-arounds for bugs in the TensorFlow and Keras versions tpuestimator supports, one function each.

Each names the symptom, the cause and how to tell when it can go. They are applied by the
code that would hit the bug (not at import), and applying one twice is harmless.
"""
from __future__ import annotations

import inspect
import logging
import traceback

logger = logging.getLogger(__name__)

_applied: set[str] = set()


def fast_multi_device_iterator_teardown() -> bool:
    """Stop distributed input iterators from blocking for up to a minute when they are freed.

    Symptom (TF 2.17-2.21): with MirroredStrategy over several devices (GPUs, or logical CPU
    devices), freeing a distributed iterator (`del`, or the garbage collector, at any later
    point in the program) blocks the calling thread, GIL held, for 0.2-40 s; seen as random
    multi-minute stalls in a process that trains several models (tests, R sessions).
    Cause: `MultiDeviceIterator` builds one prefetch dataset per device with default
    `tf.data.Options`, so each gets an autotuning model thread; the iterator's destructor
    waits for that thread to wake from its timed sleep. The per-device prefetch buffers are
    fixed-size, so autotuning them tunes nothing: turning it off there costs no speed.
    Remove when `multi_device_iterator_ops._create_device_dataset` passes options through
    (benchmarks/bench_teardown.py measures the stall with and without this).

    Returns True when the work-around is in place.
    """
    name = "fast_multi_device_iterator_teardown"
    if name in _applied:
        return True
    import tensorflow as tf

    try:
        from tensorflow.python.data.ops import multi_device_iterator_ops as mdi

        create = mdi._create_device_dataset
    except (ImportError, AttributeError):
        logger.debug("%s: this TensorFlow (%s) has no _create_device_dataset; not applied", name, tf.__version__)
        return False

    options = tf.data.Options()
    options.autotune.enabled = False

    def create_device_dataset(*args, **kwargs):
        return create(*args, **kwargs).with_options(options)

    create_device_dataset.__wrapped__ = create
    mdi._create_device_dataset = create_device_dataset
    _applied.add(name)
    return True


def drop_tensorflow_frame_locals(error: BaseException) -> int:
    """Let an input iterator an error passed through be freed now, not by a later garbage collection.

    Symptom (TF 2.21): after an error from training or from reading a dataset (bad data, the
    NaN/Inf sentinel, an interrupt), the process later stops, GIL held, for up to a minute, at
    a random point: a notebook's or R session's next cell, or another test.
    Cause: freeing a tf.data iterator whose autotuning thread is in one of its timed sleeps
    waits for that sleep to end, and the sleeps double up to 60 s. A caught error is usually
    in a reference cycle (the frame that holds it is in its own traceback), and its traceback
    keeps the frames it passed through: TensorFlow's own (`OwnedIterator.__next__`'s `self`,
    the loop function's arguments) hold the iterator, so it is freed by the cyclic garbage
    collector at some later point, whenever its sleep happens to end. Measured in the test
    suite: collections of 10-41 s inside unrelated tests.
    Here the finished frames of TensorFlow's modules in `error`'s traceback, and in those of
    its cause and context, drop their local variables (`frame.clear()`). The traceback still
    prints in full; only a post-mortem debugger loses the locals of TensorFlow's frames. The
    product's own frames are left alone: the training iterator is dropped by its owner
    (`Trainer.release_input`). Remove when freeing an idle iterator returns at once: `del it`
    after `it = iter(Dataset.range(10**9).map(f, AUTOTUNE).batch(16).prefetch(AUTOTUNE))` was
    read for 2 s and left idle for 20 s took 19 s on TF 2.21.

    Returns the number of frames cleared.
    """
    cleared = 0
    seen_errors: set[int] = set()
    seen_frames: set[int] = set()
    pending = [error]
    while pending:
        exc = pending.pop()
        if exc is None or id(exc) in seen_errors:
            continue
        seen_errors.add(id(exc))
        for frame, _ in traceback.walk_tb(exc.__traceback__):
            # and the frames' callers: TensorFlow cuts its own frames out of the tracebacks it
            # re-raises, but the frame a traceback still names keeps them as its `f_back`
            while frame is not None and id(frame) not in seen_frames:
                seen_frames.add(id(frame))
                if _is_tensorflow_frame(frame):
                    try:
                        frame.clear()
                        cleared += 1
                    except RuntimeError:  # still executing: its caller is handling the error
                        pass
                frame = frame.f_back
        pending += [exc.__cause__, exc.__context__]
    return cleared


def _is_tensorflow_frame(frame) -> bool:
    """A frame of TensorFlow's own Python code, not a generator's (clearing a suspended
    generator's frame would close it, running its `finally` blocks)."""
    if frame.f_code.co_flags & _GENERATOR_FLAGS:
        return False
    module = frame.f_globals.get("__name__", "")
    return module == "tensorflow" or module.startswith("tensorflow.")


_GENERATOR_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def atomic_optimizer_counters(optimizer) -> list:
    """Make the optimizer's step counters add in one op, so parameter-server workers lose no step.

    Symptom (Keras 3.x, TensorFlow backend): under parameter servers with 2 workers,
    `optimizer.iterations` read 169 after 200 steps (tests/python/test_cluster_ps.py), so
    learning-rate schedules, Adam's bias correction and a `LossScaleOptimizer`'s growth
    interval lag behind the global step.
    Cause: the optimizer ends each `apply` with `iterations.assign_add(1)`, and Keras's
    `Variable.assign_add` is `assign(self + value)`: a read, then a write. The counter lives on
    a ps and both workers update it at once, so one worker's write can undo the other's
    increment. (The optimizer's own `assign_add`, used for its slots, already adds on the
    `tf.Variable`; only the counters take Keras's path.)
    Here each integer variable of the optimizer (the iteration counter; a `LossScaleOptimizer`'s
    `step_counter`) becomes an instance of a subclass of its own Keras variable class whose
    `assign_add`/`assign_sub` call the underlying `tf.Variable`'s (`Variable.value`), one op the
    ps applies under the variable's lock. Same objects, names and values: checkpoints written
    before and after restore into each other. Elsewhere it is the same update in one op
    instead of two. Keras's stateless scopes are not a concern: the TensorFlow backend refuses
    `stateless_apply`. Remove when Keras's TensorFlow `Variable.assign_add` calls
    `tf.Variable.assign_add`.

    Returns the counters now adding atomically.
    """
    counters = [v for v in optimizer.variables if _is_integer(v)]
    for counter in counters:
        if not isinstance(counter, AtomicAddition):
            counter.__class__ = _atomic_class(type(counter))
    return counters


class AtomicAddition:
    """Mixin of `atomic_optimizer_counters`: `assign_add`/`assign_sub` of a Keras TensorFlow
    variable done by its `tf.Variable` in one op."""

    def assign_add(self, value):
        import tensorflow as tf

        return self.value.assign_add(tf.cast(value, self.value.dtype))

    def assign_sub(self, value):
        import tensorflow as tf

        return self.value.assign_sub(tf.cast(value, self.value.dtype))


_atomic_classes: dict[type, type] = {}


def _atomic_class(cls: type) -> type:
    if cls not in _atomic_classes:
        _atomic_classes[cls] = type(f"Atomic{cls.__name__}", (AtomicAddition, cls), {})
    return _atomic_classes[cls]


def _is_integer(variable) -> bool:
    import tensorflow as tf

    return tf.as_dtype(variable.dtype).is_integer
