"""Serving: the SavedModel's `serving_default` function, the export's metadata
(`write_export_metadata`, read back by `load_export`), and prediction with an export
(loading it and turning raw inputs — TFRecord files read with the training data's format,
image files, arrays — into its serving inputs).

The CLI's `tpuestimator predict` and R's `predict()` call `predict`.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from tpuestimator.errors import ConfigError
from tpuestimator.io import atomic_write_json
from tpuestimator.spec import model_inputs
from tpuestimator.tracing import device_function

EXPORT_META = "tpuestimator.json"


def serving_module(spec, feature_spec: dict):
    """A `tf.Module` holding `spec.model` and its `serve` function (the `serving_default`
    signature): `spec.serving_inputs` (default: the features the model was built on),
    `spec.serving_preprocess`, the predictions cast to float32, `class` strings from
    `spec.class_names`."""
    import tensorflow as tf

    inputs = spec.serving_inputs or {name: tf.TensorSpec(shape, tf.as_dtype(dtype), name=name)
                                     for name, (shape, dtype) in feature_spec.items()}
    signature = {name: tf.TensorSpec([None, *s.shape], s.dtype, name=name) for name, s in inputs.items()}
    class_names = list(spec.class_names) if spec.class_names else None
    module = tf.Module()
    module.model = spec.model

    def serve(features):
        model_features = spec.serving_preprocess(features) if spec.serving_preprocess else features
        outputs = spec.model(model_inputs(model_features), training=False)
        preds = dict(spec.predictions(outputs)) if spec.predictions else {"outputs": outputs}
        preds = {k: tf.cast(v, tf.float32) if v.dtype in (tf.float16, tf.bfloat16) else v for k, v in preds.items()}
        if class_names is not None and "class_id" in preds:
            preds["class"] = tf.gather(tf.constant(class_names), preds["class_id"])
        return preds

    module.serve = device_function(serve, input_signature=[signature])
    return module


def write_export_metadata(export_dir: str, cfg, estimator) -> None:
    """Writes `assets.extra/tpuestimator.json` (data section, classes, features) into an export,
    so `tpuestimator predict EXPORT FILE...` can read raw files the way training did.

    Args:
      export_dir: the SavedModel folder.
      cfg: the job's `JobConfig`.
      estimator: the Estimator that exported it (built: its spec and feature spec are read).
    """
    meta = {"data": cfg.section("data"), "class_names": list(estimator.spec.class_names or []),
            "feature_spec": {k: [list(s), d] for k, (s, d) in estimator.feature_spec.items()},
            "model": cfg.model, "global_step": estimator.global_step}
    atomic_write_json(os.path.join(export_dir, "assets.extra", EXPORT_META), meta)


def load_export(export_dir: str):
    """(serving function, metadata dict) of an export written by tpuestimator."""
    import tensorflow as tf

    loaded = tf.saved_model.load(export_dir)
    meta_path = os.path.join(export_dir, "assets.extra", EXPORT_META)
    meta = json.loads(Path(meta_path).read_text()) if os.path.exists(meta_path) else {}
    return loaded, meta


def predict(export_dir: str, inputs, *, batch_size: int = 256) -> list[dict]:
    """Predicts with an exported SavedModel.

    Args:
      export_dir: the export (or a run folder holding `export/`).
      inputs: TFRecord file paths (read with the training data's format), image files
        (JPEG/PNG, for image models), or a dict of arrays / an array for the serving inputs.

    Returns:
      one dict per example (numpy values; `class` as str).
    """
    import tensorflow as tf

    if (Path(export_dir) / "export").is_dir() and not (Path(export_dir) / "saved_model.pb").exists():
        export_dir = str(Path(export_dir) / "export")
    if not (Path(export_dir) / "saved_model.pb").exists():
        raise ConfigError("EXPORT_DIR", export_dir, "a SavedModel folder (holding saved_model.pb) written by "
                          "`tpuestimator train` or `tpuestimator export`")
    loaded, meta = load_export(export_dir)
    serve = loaded.signatures["serving_default"]
    feature_arrays = predict_inputs(inputs, meta)
    check_predict_shapes(feature_arrays, meta.get("feature_spec") or {})
    n = len(next(iter(feature_arrays.values())))
    out: list[dict] = []
    for start in range(0, n, batch_size):
        batch = {k: tf.constant(v[start:start + batch_size]) for k, v in feature_arrays.items()}
        result = serve(**batch)
        arrays = {k: v.numpy() for k, v in result.items()}
        for i in range(len(next(iter(arrays.values())))):
            row = {}
            for k, v in arrays.items():
                value = v[i]
                row[k] = value.decode() if isinstance(value, bytes) else value
            out.append(row)
    return out


def check_predict_shapes(arrays: dict, spec: dict) -> None:
    """A wrongly shaped input must be an error naming the feature, not a crash inside TensorFlow."""
    for name, (shape, _dtype) in spec.items():
        if name not in arrays:
            raise ConfigError("inputs", sorted(arrays), f"a value for every feature the model takes: {sorted(spec)}")
        got = tuple(arrays[name].shape)
        if len(got) != len(shape) + 1 or tuple(got[1:]) != tuple(shape):
            raise ConfigError(f"inputs.{name}", f"an array of shape {got}",
                              f"shape (n, {', '.join(str(d) for d in shape)}): one row per example")


def predict_inputs(inputs, meta: dict) -> dict:
    import numpy as np

    spec = meta.get("feature_spec") or {}
    if isinstance(inputs, Mapping):
        return {k: np.asarray(v, dtype=spec.get(k, [None, "float32"])[1]) for k, v in inputs.items()}
    if hasattr(inputs, "shape"):
        if len(spec) != 1:
            raise ConfigError("inputs", type(inputs).__name__, f"a dict of arrays for the features {sorted(spec)}")
        name, (_, dtype) = next(iter(spec.items()))
        return {name: np.asarray(inputs, dtype=dtype)}
    files = [str(p) for p in ([inputs] if isinstance(inputs, (str, os.PathLike)) else inputs)]
    for f in files:
        if not os.path.exists(f):
            raise ConfigError("FILE", f, "an existing TFRecord or image file")
    images = [f for f in files if f.lower().endswith((".jpg", ".jpeg", ".png"))]
    if images:
        from tpuestimator.data.decode import decode_image_files

        return {"image": decode_image_files(images, (meta.get("data") or {}).get("image") or {})}
    from tpuestimator import data

    section = dict(meta.get("data") or {})
    section["eval"] = files
    section.pop("train", None)
    input_fn = data.make_input_fn(section, "predict")
    columns: dict[str, list] = {}
    with data.translate_errors(input_fn.data_section, "predict"):  # a bad file is named with its record
        ds = input_fn({"batch_size": 256, "mode": "predict", "input_context": None, "seed": 0, "start_step": 0})
        for element in ds:
            features = element[0] if isinstance(element, tuple) else element
            for k, v in features.items():
                columns.setdefault(k, []).append(v.numpy())
    return {k: np.concatenate(v) for k, v in columns.items()}
