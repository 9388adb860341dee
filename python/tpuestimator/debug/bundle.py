"""The repro bundle the NaN/Inf sentinel writes, and reading it back.

A bundle is a folder:

- `bundle.json`: what to rebuild: the model (built-in name or `module:function`), the model
  function's params, the run settings that shape a step (global batch, replicas, precision,
  seed), the offending step, what went non-finite, the last good checkpoint of the model dir
  and the bundled checkpoint's prefix.
- `config.yaml`: the job's resolved configuration (when the Estimator ran from a job).
- `batch.tfrecord`: the offending global batch(es): one record per step, a `tf.train.Example`
  whose features hold `tf.io.serialize_tensor` bytes (exact dtype and shape) of every feature,
  of the labels (`__labels__`) and the global step (`__step__`).
- `checkpoint/`: the model, optimizer and global step just BEFORE the offending step (finite),
  so a replay runs exactly that step.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

BUNDLE_JSON = "bundle.json"
BATCH_FILE = "batch.tfrecord"
CHECKPOINT_DIR = "checkpoint"
LABELS_KEY = "__labels__"
STEP_KEY = "__step__"
FORMAT_VERSION = 1


def write_batches(path: str, batches: Iterable[tuple[int, Mapping[str, Any], Any]]) -> int:
    """Writes (step, features, labels) batches; returns how many."""
    import tensorflow as tf

    n = 0
    with tf.io.TFRecordWriter(path) as writer:
        for step, features, labels in batches:
            feature = {name: _bytes(tf.io.serialize_tensor(tf.convert_to_tensor(value)).numpy())
                       for name, value in features.items()}
            if labels is not None:
                feature[LABELS_KEY] = _bytes(tf.io.serialize_tensor(tf.convert_to_tensor(labels)).numpy())
            feature[STEP_KEY] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(step)]))
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
            n += 1
    return n


def _bytes(value: bytes):
    import tensorflow as tf

    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def read_batches(path: str, feature_dtypes: Mapping[str, str] | None = None,
                 labels_dtype: str | None = None) -> list[tuple[int, dict, Any]]:
    """Reads `write_batches` records back as (step, {name: tensor}, labels tensor or None)."""
    import tensorflow as tf

    out = []
    for raw in tf.data.TFRecordDataset(path):
        example = tf.train.Example.FromString(raw.numpy())
        feats, labels, step = {}, None, -1
        for name, feature in example.features.feature.items():
            if name == STEP_KEY:
                step = int(feature.int64_list.value[0])
                continue
            data = feature.bytes_list.value[0]
            dtype = (labels_dtype if name == LABELS_KEY else (feature_dtypes or {}).get(name))
            tensor = _parse_any(data, dtype)
            if name == LABELS_KEY:
                labels = tensor
            else:
                feats[name] = tensor
        out.append((step, feats, labels))
    return out


def _parse_any(data: bytes, dtype: str | None):
    """`tf.io.parse_tensor` needs the dtype: read it from the TensorProto itself."""
    import tensorflow as tf
    from tensorflow.core.framework import tensor_pb2

    if dtype is None:
        proto = tensor_pb2.TensorProto.FromString(data)
        return tf.constant(tf.make_ndarray(proto))
    return tf.io.parse_tensor(data, tf.as_dtype(dtype))


def write_json(bundle_dir: str, payload: Mapping[str, Any]) -> str:
    from tpuestimator.system.io import atomic_write_json

    path = os.path.join(bundle_dir, BUNDLE_JSON)
    atomic_write_json(path, {"format_version": FORMAT_VERSION, **payload})
    return path


def read_json(bundle_dir: str) -> dict:
    """The bundle's description; raises ConfigError naming BUNDLE when it is not a bundle."""
    from tpuestimator.errors import ConfigError

    path = os.path.join(bundle_dir, BUNDLE_JSON)
    if not os.path.isfile(path):
        # Accept the report folder too: its bundle sits in `bundle/`.
        nested = os.path.join(bundle_dir, "bundle", BUNDLE_JSON)
        if os.path.isfile(nested):
            path = nested
        else:
            raise ConfigError("BUNDLE", bundle_dir, "a repro bundle folder written by the NaN/Inf sentinel "
                              f"(holding {BUNDLE_JSON}; the error message and report.txt name it)")
    with open(path) as fh:
        payload = json.load(fh)
    payload["_dir"] = os.path.dirname(os.path.abspath(path))
    return payload


def model_reference(model_fn) -> str | None:
    """`module:function` when the model function can be imported back by name, else None."""
    from tpuestimator.models import BUILTIN

    for name, target in BUILTIN.items():
        module, _, attr = target.partition(":")
        if getattr(model_fn, "__module__", None) == module and getattr(model_fn, "__qualname__", None) == attr:
            return name
    module = getattr(model_fn, "__module__", None)
    qual = getattr(model_fn, "__qualname__", "")
    if not module or not qual or "<" in qual or module == "__main__":
        return None
    return f"{module}:{qual}"
