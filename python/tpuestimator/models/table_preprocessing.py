"""The preprocessing of a table's raw values into what the model receives, with Keras 3's
preprocessing layers (Normalization, Discretization, StringLookup, Hashing, HashedCrossing;
whole-number vocabularies are looked up by `WholeNumberLookup`, as IntegerLookup would), built from the feature columns (`models.feature_columns`) with no `adapt()`: the
vocabularies and statistics come from the training split, through the manifest.

String lookups and hashing cannot run on a TPU core, so in training they run in the input
pipeline on the host (the data layer's decoder calls `TablePreprocessor` in its tf.data map);
the export includes the same object, so its `tf.Example` and `features` signatures take raw
strings and numbers. The model itself only sees numbers:

- numeric: float32 [b], normalized (mean and variance of the training split);
- every other type: int32 [b] indices in [0, cardinality) (`feature_columns.cardinality`);

each under the column's input name (`feature_columns.input_name`: `Petal.Length` -> `petal_length`),
which Keras and TensorFlow signatures accept whatever the column is called.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from tpuestimator.models.column_spec import ColumnSpec, columns_as_dicts, parse_columns
from tpuestimator.models.feature_columns import input_name
from tpuestimator.system.graph_code import as_written


def encoded_features(columns: Mapping[str, ColumnSpec]) -> dict[str, tuple[list[int], str]]:
    """What the model receives: input name -> (shape without batch, dtype name)."""
    return {input_name(name): ([], "float32" if c.type == "numeric" else "int32") for name, c in columns.items()}


def raw_dtype(column: ColumnSpec) -> str:
    """The dtype of a column's raw values (in the records and the export's `features` signature)."""
    return column.dtype


@as_written  # its instances are called as written (graph_code.as_written: the class carries the mark)
class TablePreprocessor:
    """Raw values (dict of [b] tensors) -> the model's features (see the module docstring).

    A tracked `tf.Module` (`.module`) holds the layers, so an export that stores it carries their
    lookup tables; one instance per set of columns (`preprocessor_for`), built eagerly.
    """

    def __init__(self, columns: Mapping[str, ColumnSpec]):
        import keras
        import tensorflow as tf

        self.columns = parse_columns(columns)
        layers: dict[str, Any] = {}
        with tf.init_scope():
            for name, c in self.columns.items():
                kind = c.type
                if kind == "numeric":
                    layers[name] = keras.layers.Normalization(axis=None, mean=c.mean, variance=c.variance) \
                        if c.normalized else None
                elif kind == "bucketized":
                    layers[name] = keras.layers.Discretization(bin_boundaries=list(c.boundaries))
                elif kind == "categorical" and c.dtype == "string":
                    layers[name] = keras.layers.StringLookup(vocabulary=[str(v) for v in c.vocabulary],
                                                             num_oov_indices=c.cardinality - len(c.vocabulary),
                                                             mask_token=None)
                elif kind == "categorical" and c.cardinality > len(c.vocabulary):
                    layers[name] = WholeNumberLookup([int(v) for v in c.vocabulary], c.cardinality - len(c.vocabulary))
                elif kind == "categorical":  # no out-of-vocabulary bucket: an unseen value is an error
                    layers[name] = keras.layers.IntegerLookup(vocabulary=[int(v) for v in c.vocabulary],
                                                              num_oov_indices=0, mask_token=None)
                elif kind in ("hashed", "crossed"):
                    layers[name] = (keras.layers.Hashing if kind == "hashed" else keras.layers.HashedCrossing)(
                        num_bins=int(c.buckets))
                else:
                    layers[name] = None  # identity: a range check
            # Built here, eagerly: a layer built by its first call inside a tf.data map or a
            # signature would keep that graph's constants and break the next graph using it.
            for name, layer in layers.items():
                if layer is not None and self.columns[name].stored:
                    c = self.columns[name]
                    dummy = {"string": tf.constant([""]), "int64": tf.constant([0], tf.int64)}.get(
                        c.dtype, tf.constant([0.0]))
                    if c.type in ("numeric", "bucketized"):
                        dummy = tf.constant([0.0])
                    layer(dummy)
            # The normalized numeric columns are normalized together, as one [b, k] block: the
            # same float32 arithmetic per value as each column's own layer, in 2 ops instead of 2k.
            self.normalized = [name for name, c in self.columns.items() if c.type == "numeric" and c.normalized]
            self.block = None
            if len(self.normalized) > 1:
                self.block = keras.layers.Normalization(
                    axis=-1, mean=[self.columns[n].mean for n in self.normalized],
                    variance=[self.columns[n].variance for n in self.normalized])
                self.block(tf.zeros([1, len(self.normalized)]))
        self.module = tf.Module(name="table_preprocessing")
        self.module.layers = {k: v for k, v in layers.items() if v is not None and not isinstance(v, WholeNumberLookup)}
        self.layers = layers

    @property
    def raw_inputs(self) -> dict[str, tuple[list[int], str]]:
        """The raw values it takes: name -> ([], dtype name)."""
        return {name: ([], raw_dtype(c)) for name, c in self.columns.items() if c.stored}

    @as_written  # plain graph code, traced by the input pipeline, the steps and the export alike
    def __call__(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        return self._preprocess(raw)

    def _preprocess(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        import tensorflow as tf

        out: dict[str, Any] = {}
        if self.block is not None:
            values = [tf.cast(_flat(raw[name]), tf.float32) for name in self.normalized]
            out.update(zip(self.normalized, tf.unstack(self.block(tf.stack(values, axis=1)), axis=1)))
        for name, c in self.columns.items():
            if not c.stored or name in out:
                continue
            value = _flat(raw[name])
            kind = c.type
            if kind == "numeric":
                value = tf.cast(value, tf.float32)
                out[name] = self.layers[name](value) if self.layers[name] is not None else value
            elif kind == "bucketized":
                out[name] = tf.cast(self.layers[name](tf.cast(value, tf.float32)), tf.int32)
            elif kind == "identity":
                n = int(c.buckets)
                value = tf.cast(value, tf.int64)
                out[name] = tf.cast(tf.where((value >= 0) & (value < n), value, n), tf.int32)
            else:
                out[name] = tf.cast(self.layers[name](value), tf.int32)
        for name, c in self.columns.items():
            if c.type == "crossed":
                parts = tuple(tf.cast(out[p], tf.int64) for p in c.columns)
                out[name] = tf.cast(self.layers[name](parts), tf.int32)
        return {input_name(name): out[name] for name in self.columns if name in out}  # in the columns' order

    def cardinalities(self) -> dict[str, int]:
        return {k: c.cardinality for k, c in self.columns.items() if c.type != "numeric"}


@as_written
class WholeNumberLookup:
    """A whole-number vocabulary's lookup as comparisons with the vocabulary, no hash table:
    a value in it -> its position + `oov_buckets`, any other value -> floormod(value,
    oov_buckets), the indices Keras's IntegerLookup(vocabulary, num_oov_indices=oov_buckets,
    mask_token=None) gives. IntegerLookup's int64-keyed hash table is no op TFLite's built-in
    ops have (their tables map strings); equal, argmax, reduce_any, floormod and select are, so
    an export with whole-number vocabularies converts to TFLite as it is. Memory: a [batch,
    vocabulary] comparison, at most 1000 values (`feature_columns.MAX_VOCABULARY` infers no more).
    """

    def __init__(self, vocabulary: list[int], oov_buckets: int):
        self.vocabulary = [int(v) for v in vocabulary]
        self.oov_buckets = int(oov_buckets)

    def __call__(self, value):
        import tensorflow as tf

        value = tf.cast(value, tf.int64)
        unseen = tf.cast(tf.math.floormod(value, self.oov_buckets), tf.int32)
        if not self.vocabulary:
            return unseen
        matches = tf.equal(tf.expand_dims(value, -1), tf.constant(self.vocabulary, tf.int64))
        position = tf.argmax(matches, axis=-1, output_type=tf.int32)
        return tf.where(tf.reduce_any(matches, axis=-1), position + self.oov_buckets, unseen)


def _flat(value):
    """`value` as a [b] vector (no op when it is one already)."""
    import tensorflow as tf

    value = tf.convert_to_tensor(value)
    return value if value.shape.rank == 1 else tf.reshape(value, [-1])


@functools.lru_cache(maxsize=16)
def _cached(key: str) -> TablePreprocessor:
    return TablePreprocessor(json.loads(key))


def preprocessor_for(columns: Mapping[str, ColumnSpec]) -> TablePreprocessor:
    """The one `TablePreprocessor` of these columns in this process (the input pipeline, the
    model function and the export share it, so the export tracks the tables its signatures use;
    keyed by the columns' JSON, as the manifest holds them)."""
    return _cached(json.dumps(columns_as_dicts(parse_columns(columns)), sort_keys=True))
