"""Work-arounds for bugs in the TensorFlow versions tpuestimator supports, one function each.

Each names the symptom, the cause and how to tell when it can go. They are applied by the
code that would hit the bug (not at import), and applying one twice is harmless.
"""
from __future__ import annotations

import logging

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
