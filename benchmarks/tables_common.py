"""Shared pieces of the speed benchmarks of tables (bench_tables_speed.py, bench_tables_input.py):
the synthetic mixed table, the bare `read + batch + parse_example` pipeline on its records,
and the Keras DNN over a FeatureSpace's encoded features.

The mixed table has 20 features, as a tabular user's table might: 12 numeric (some integer
valued, different scales) and 8 string categoricals with vocabularies of 3 to 1,000 values
(skewed frequencies), and a binary label that depends on both kinds, non-linearly.

Nothing here imports TensorFlow at module level.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

NUMERIC = [f"num_{i:02d}" for i in range(12)]
CATEGORICAL = {f"cat_{i}": size for i, size in enumerate((3, 5, 10, 20, 50, 100, 500, 1000))}
LABEL = "label"


def make_mixed_table(n: int, seed: int = 0):
    """A pandas DataFrame of `n` rows: NUMERIC (float), CATEGORICAL (str), LABEL (int 0/1)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    cols = {}
    logit = np.zeros(n)
    for i, name in enumerate(NUMERIC):
        scale = 10.0 ** (i % 4 - 1)  # 0.1 .. 100: normalisation matters
        x = rng.normal(loc=i, scale=scale, size=n)
        if i % 3 == 2:
            x = np.round(x)  # integer-valued counts
        cols[name] = x.astype(np.float32)
        z = (x - i) / scale
        logit += (0.6 if i % 2 else -0.4) * z + (0.3 * z * z - 0.3 if i % 5 == 0 else 0.0)
    for name, size in CATEGORICAL.items():
        p = 1.0 / np.arange(1, size + 1) ** 1.1  # Zipf-like: a few common values, a long tail
        idx = rng.choice(size, size=n, p=p / p.sum())
        cols[name] = np.array([f"{name}_v{k}" for k in range(size)], dtype=object)[idx]
        effect = rng.normal(scale=0.8, size=size)
        logit += effect[idx]
    cols[LABEL] = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int64)
    return pd.DataFrame(cols)


def write_records(df, out_dir: str | os.PathLike, name: str = "train", shards: int = 2) -> str:
    """Writes `df` as tf.train.Examples (numeric: float [1], categorical: bytes [1], label:
    int64 [1]), in `shards` files; returns the file pattern."""
    import tensorflow as tf

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    n = len(df)
    per = -(-n // shards)
    num = {k: df[k].to_numpy(np.float32) for k in NUMERIC}
    cat = {k: df[k].to_numpy() for k in CATEGORICAL}
    lab = df[LABEL].to_numpy(np.int64)
    for s in range(shards):
        with tf.io.TFRecordWriter(str(out / f"{name}-{s:05d}-of-{shards:05d}.tfrecord")) as writer:
            for i in range(s * per, min(n, (s + 1) * per)):
                feats = {k: tf.train.Feature(float_list=tf.train.FloatList(value=[num[k][i]])) for k in NUMERIC}
                feats.update({k: tf.train.Feature(bytes_list=tf.train.BytesList(value=[cat[k][i].encode()]))
                              for k in CATEGORICAL})
                feats[LABEL] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(lab[i])]))
                writer.write(tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString())
    return str(out / f"{name}-*.tfrecord")


def parse_spec(shape=(1,)):
    """The `parse_example` spec of the records (every feature and the label)."""
    import tensorflow as tf

    spec = {k: tf.io.FixedLenFeature(list(shape), tf.float32) for k in NUMERIC}
    spec.update({k: tf.io.FixedLenFeature(list(shape), tf.string) for k in CATEGORICAL})
    spec[LABEL] = tf.io.FixedLenFeature(list(shape), tf.int64)
    return spec


def bare_dataset(pattern: str, batch: int, *, train: bool = True, cache: bool = False, parallel: int = 2):
    """The least any parser does: TFRecordDataset -> (shuffle, repeat) -> batch -> ONE
    parse_example per batch -> prefetch. Yields ({feature: [batch, 1]}, label [batch])."""
    import tensorflow as tf

    spec = parse_spec()
    ds = tf.data.TFRecordDataset(sorted(tf.io.gfile.glob(pattern)))
    if cache:
        ds = ds.cache()
    if train:
        ds = ds.shuffle(1024, seed=0).repeat()
    ds = ds.batch(batch, drop_remainder=train)

    def parse(serialized):
        feats = tf.io.parse_example(serialized, spec)
        return feats, tf.reshape(feats.pop(LABEL), [-1])
    return ds.map(parse, num_parallel_calls=parallel).prefetch(2)


def keras_dnn(fs, embedding_dims: dict, hidden_units=(128, 64), n_outputs: int = 2):
    """The DNN over FeatureSpace's encoded features: one-hots and normalised numerics
    concatenated with the flattened embeddings (`embedding_dims[name]` wide) of the integer-id
    categoricals, `hidden_units` ReLU layers, `n_outputs` logits."""
    import keras

    encoded = fs.get_encoded_features()
    parts = []
    for name, tensor in sorted(encoded.items()):
        if tensor.dtype in ("int32", "int64"):
            size = fs.preprocessors[name].vocabulary_size()
            parts.append(keras.layers.Flatten()(keras.layers.Embedding(size, embedding_dims[name])(tensor)))
        else:
            parts.append(keras.ops.cast(tensor, "float32"))
    x = keras.layers.Concatenate()(parts)
    for units in hidden_units:
        x = keras.layers.Dense(units, activation="relu")(x)
    logits = keras.layers.Dense(n_outputs)(x)
    return keras.Model(encoded, logits)


def save_json(path: str | os.PathLike, payload) -> str:
    Path(path).write_text(json.dumps(payload, indent=1))
    return str(path)
