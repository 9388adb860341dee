"""The per-step work the table benchmark (issue 21.8) cut, and that it was cut without changing
any result: the numeric columns normalized as one block, and the training stream declared
endless (no optional and `cond` per step in the train loop). Real TensorFlow on tiny data."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf

FIX = Path(__file__).resolve().parents[1] / "fixtures"
MNIST = {"format": "mnist", "train": str(FIX / "mnist_good.tfrecord"), "eval": str(FIX / "mnist_good.tfrecord"),
         "image": {"height": 8, "width": 8, "channels": 1}}


def test_numeric_columns_normalized_as_one_block_match_each_columns_layer():
    import keras

    from tpuestimator.models.table_preprocessing import TablePreprocessor

    columns = {"a": {"type": "numeric", "dtype": "float32", "mean": 3.25, "variance": 0.01},
               "kind": {"type": "categorical", "dtype": "string", "vocabulary": ["x", "y"], "encoding": "one_hot"},
               "b": {"type": "numeric", "dtype": "float32", "mean": -1200.0, "variance": 4.0e5},
               "raw": {"type": "numeric", "dtype": "float32", "mean": 7.0, "variance": 2.0, "normalize": False},
               "c": {"type": "numeric", "dtype": "float32", "mean": 0.1, "variance": 1.0e-9}}
    rng = np.random.default_rng(0)
    raw = {name: tf.constant(rng.normal(scale=10.0 ** rng.integers(-3, 4), size=50).astype(np.float32))
           for name in ("a", "b", "raw", "c")}
    raw["kind"] = tf.constant(rng.choice(["x", "y", "z"], size=50))
    out = TablePreprocessor(columns)(raw)
    assert list(out) == ["a", "kind", "b", "raw", "c"]  # the columns' order
    for name in ("a", "b", "c"):
        layer = keras.layers.Normalization(axis=None, mean=columns[name]["mean"], variance=columns[name]["variance"])
        np.testing.assert_array_equal(out[name].numpy(), layer(raw[name]).numpy())  # bitwise
    np.testing.assert_array_equal(out["raw"].numpy(), raw["raw"].numpy())
    assert out["kind"].numpy().tolist() == [{"x": 1, "y": 2}.get(v.decode(), 0) for v in raw["kind"].numpy()]  # OOV: 0


def test_the_training_stream_is_endless_so_the_train_loop_reads_without_a_cond():
    """An input that may end is read through an optional and a `cond` every step (core.loops);
    the built-in training stream never ends and says so."""
    from tpuestimator.data import make_input_fn

    for extra in ({}, {"cache_decoded": True}):
        ds = make_input_fn({**MNIST, **extra}, "train")({"batch_size": 4, "seed": 0})
        assert int(ds.cardinality()) == int(tf.data.INFINITE_CARDINALITY)
    assert int(make_input_fn(MNIST, "eval")({"batch_size": 4}).cardinality()) != int(tf.data.INFINITE_CARDINALITY)
