"""The TensorFlow work-arounds are in force where the bug would bite, and change no results."""
from __future__ import annotations

import numpy as np


def _per_device_iterators(strategy, dataset_fn):
    import tensorflow as tf

    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
    first = strategy.experimental_local_results(next(iterator))
    # TensorFlow's own objects, read to check the work-around reached them: if these names
    # change, the patched function has most likely changed too.
    devices = iterator._iterators[0]._iterator._device_iterators
    assert all(isinstance(d, tf.data.Iterator) for d in devices)
    return devices, first


def test_mirrored_input_per_device_datasets_do_not_autotune():
    import tensorflow as tf

    from tpuestimator.core.workarounds import fast_multi_device_iterator_teardown

    assert fast_multi_device_iterator_teardown()
    assert fast_multi_device_iterator_teardown()            # a second call changes nothing
    devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    strategy = tf.distribute.MirroredStrategy(devices)

    def dataset_fn(ctx):
        return tf.data.Dataset.range(64).batch(ctx.get_per_replica_batch_size(16)).repeat()

    device_iterators, first = _per_device_iterators(strategy, dataset_fn)
    assert len(device_iterators) == len(devices) == 8
    assert all(d._dataset.options().autotune.enabled is False for d in device_iterators)
    # Same values as before the work-around: replica i gets the i-th slice of the global batch.
    np.testing.assert_array_equal(np.concatenate([t.numpy() for t in first]), np.arange(16))


def test_building_a_strategy_puts_the_work_around_in_place(python_env):
    # In a fresh process: in this one an earlier test may have applied it already.
    import subprocess
    import sys

    code = ("from tensorflow.python.data.ops import multi_device_iterator_ops as mdi\n"
            "from tpuestimator.core.devices import make_strategy\n"
            "assert not hasattr(mdi._create_device_dataset, '__wrapped__')\n"
            "make_strategy({'strategy': 'mirrored'})\n"
            "assert hasattr(mdi._create_device_dataset, '__wrapped__')\n")
    proc = subprocess.run([sys.executable, "-c", code], env=python_env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
