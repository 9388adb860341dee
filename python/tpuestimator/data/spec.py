"""What the records hold and what the model receives: formats, feature specs, vocabulary.

Nothing here imports TensorFlow at module level. A `data` section (the config's, defaults
filled or not) is first *resolved*: a `data.manifest` written by the TFRecord writer
supplies the format, feature spec, image size, label and vocabulary, and the patterns of
the train/eval shards; fields set in the config win over the manifest's.
"""
from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping
from typing import Any

from tpuestimator.config import DEFAULTS
from tpuestimator.errors import DataError

FORMATS = ("mnist", "flowers", "features")

# Record keys of the MNIST TFRecord format and of TPUEstimator's flowers example.
MNIST_IMAGE_KEY = "image_raw"
MNIST_LABEL_KEY = "label"
FLOWERS_IMAGE_KEY = "image/encoded"
FLOWERS_LABEL_KEY = "image/class/label"
FLOWERS_TEXT_KEY = "image/class/text"

MANIFEST_NAME = "manifest.json"
# A data-section key: decode a table's raw values, not the model's numbers (for what feeds an export).
TABLE_RAW = "_table_raw"
MANIFEST_VERSION = 1

# The data section's defaults: the schema's (`tpuestimator.config.DEFAULTS`).
_SECTION_DEFAULTS: dict[str, Any] = DEFAULTS["data"]


def load_manifest(path: str) -> dict:
    """Reads a manifest.json written by `tpuestimator.data.writers` (or a folder holding one).

    Raises:
      DataError: when the file is missing or not a manifest.
    """
    import tensorflow as tf  # gfile reads gs:// too

    if tf.io.gfile.isdir(path):
        path = os.path.join(path, MANIFEST_NAME)
    if not tf.io.gfile.exists(path):
        raise DataError(f"data.manifest: {path!r} does not exist. Point data.manifest at the "
                        f"{MANIFEST_NAME} that `tpuestimator data write` wrote beside the shards.", path=path)
    try:
        with tf.io.gfile.GFile(path, "r") as fh:
            manifest = json.loads(fh.read())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"data.manifest: {path!r} is not valid JSON ({exc}). Rewrite it with "
                        "`tpuestimator data write`.", path=path) from None
    if not isinstance(manifest, dict) or "format" not in manifest:
        raise DataError(f"data.manifest: {path!r} has no `format` field; it is not a tpuestimator "
                        "manifest. Rewrite it with `tpuestimator data write`.", path=path)
    manifest["_dir"] = os.path.dirname(os.path.abspath(path)) if "://" not in path else os.path.dirname(path)
    return manifest


def resolve_section(data_section: Mapping[str, Any]) -> dict:
    """Returns a copy of the `data` section with defaults and the manifest's fields filled in.

    Idempotent: resolving an already resolved section returns an equal dict.
    """
    section = copy.deepcopy(dict(data_section))
    for key, value in _SECTION_DEFAULTS.items():
        section.setdefault(key, copy.deepcopy(value))
    if section.get("manifest") and not section.get("_resolved_manifest"):
        manifest = load_manifest(section["manifest"])
        base = manifest["_dir"]
        section.setdefault("format", manifest["format"])
        for key in ("image", "label", "label_offset", "features"):
            if key in manifest and key not in section:
                section[key] = copy.deepcopy(manifest[key])
        if "vocabulary" not in section and manifest.get("vocabulary"):
            section["vocabulary"] = list(manifest["vocabulary"])
        for split in ("train", "eval"):
            info = manifest.get("splits", {}).get(split)
            if split not in section and info and info.get("pattern"):
                section[split] = _join(base, info["pattern"])
        if "num_classes" in manifest:
            section.setdefault("_num_classes", manifest["num_classes"])
        if manifest.get("feature_columns"):
            from tpuestimator.models.feature_columns import apply_overrides

            section["feature_columns"] = apply_overrides(manifest["feature_columns"], section.get("feature_columns"))
        if manifest.get("task"):
            section.setdefault("task", manifest["task"])
        if manifest.get("label_stats"):  # a regression label's training mean and std (tables.write)
            section.setdefault("label_stats", copy.deepcopy(manifest["label_stats"]))
        section["_resolved_manifest"] = True
    fmt = section.get("format")
    if fmt not in FORMATS:
        raise DataError(f"data.format is {fmt!r}; expected one of {', '.join(FORMATS)} "
                        "(or a data.manifest that names it).")
    section.setdefault("label_offset", 1 if fmt == "flowers" else 0)
    if fmt == "mnist":
        section.setdefault("label", MNIST_LABEL_KEY)
    elif fmt == "flowers":
        section.setdefault("label", FLOWERS_LABEL_KEY)
    image = section.get("image")
    if fmt in ("mnist", "flowers"):
        if not image or not all(k in image for k in ("height", "width")):
            raise DataError(f"data.image is {image!r}; {fmt} records need data.image: "
                            "{height: H, width: W, channels: C}.")
        section["image"] = {"channels": 3 if fmt == "flowers" else 1, "scale": "unit",
                            "decode_ratio": 1, **image}
    elif image:
        section["image"] = {"channels": 3, "scale": "unit", "decode_ratio": 1, **image}
    if fmt == "features":
        if not section.get("features"):
            raise DataError("data.features is empty; with data.format 'features' declare each feature "
                            "as {name: {dtype: float32|int64|string, shape: [...]}}.")
    return section


def _join(base: str, pattern: str) -> str:
    if "://" in pattern or os.path.isabs(pattern):
        return pattern
    return os.path.join(base, pattern)


def record_features(section: Mapping[str, Any], *, with_label: bool = True) -> dict[str, dict]:
    """The features stored in each record: name -> {dtype, shape, kind} (the parse spec).

    `section` must be resolved (see `resolve_section`).
    """
    fmt = section["format"]
    label = section.get("label")
    out: dict[str, dict] = {}
    if fmt == "mnist":
        out[MNIST_IMAGE_KEY] = {"dtype": "string", "shape": [], "kind": "raw_image"}
    elif fmt == "flowers":
        out[FLOWERS_IMAGE_KEY] = {"dtype": "string", "shape": [], "kind": "jpeg"}
    else:
        for name, spec in section["features"].items():
            if name == label:
                continue
            spec = dict(spec)
            kind = spec.get("kind") or ("string" if spec["dtype"] == "string" else "numeric")
            spec["kind"] = kind
            if kind in ("raw_image", "jpeg", "png"):
                spec["image_shape"] = list(spec.get("shape") or _image_shape(section, name))
                spec["shape"] = []
                spec["dtype"] = "string"
            else:
                spec["shape"] = list(spec.get("shape") or [])
            out[name] = spec
    if with_label and label:
        out[label] = {"dtype": "float32" if is_regression(section) else "int64", "shape": [], "kind": "label"}
    return out


def is_regression(section: Mapping[str, Any]) -> bool:
    """True when the records' label is a number to predict (a table written with a regression label)."""
    return section.get("task") == "regression"


def feature_columns(section: Mapping[str, Any]) -> dict[str, dict] | None:
    """The table's feature columns (`tpuestimator.models.feature_columns`), None for data that is no table."""
    return dict(section.get("feature_columns") or {}) or None


def _image_shape(section: Mapping[str, Any], name: str) -> list[int]:
    image = section.get("image")
    if not image:
        raise DataError(f"data.features.{name}: an image feature needs a shape [height, width, channels] "
                        "(or a data.image section).", feature=name)
    return [image["height"], image["width"], image.get("channels", 3)]


def model_features(section: Mapping[str, Any]) -> dict[str, tuple[list[int], str]]:
    """What the model receives: name -> (shape without batch, dtype name). No TensorFlow."""
    section = resolve_section(section)
    fmt = section["format"]
    if fmt in ("mnist", "flowers"):
        img = section["image"]
        return {"image": ([img["height"], img["width"], img["channels"]], "float32")}
    if section.get("feature_columns"):
        from tpuestimator.models.table_preprocessing import encoded_features

        return encoded_features(section["feature_columns"])
    out = {}
    for name, spec in record_features(section, with_label=False).items():
        kind = spec["kind"]
        if kind in ("raw_image", "jpeg", "png"):
            out[name] = (list(spec["image_shape"]), "float32")
        elif spec["dtype"] == "int64":
            out[name] = (list(spec["shape"]), "int32")
        else:
            out[name] = (list(spec["shape"]), spec["dtype"])
    return out


def describe_features(data_section: Mapping[str, Any]) -> dict[str, tuple[tuple[int, ...], Any]]:
    """What shapes and dtypes the model receives, for building a serving signature.

    Returns:
      dict feature name -> (shape without the batch dimension, `tf.DType`). Images are
      float32 ``(height, width, channels)`` (before any `transpose_input`); int64 features
      arrive as int32.
    """
    import tensorflow as tf

    return {name: (tuple(shape), tf.as_dtype(dtype)) for name, (shape, dtype) in model_features(data_section).items()}


def vocabulary(data_section: Mapping[str, Any]) -> list[str] | None:
    """Class names by label id: from `data.vocabulary` (a list or a text file, one per line) or the manifest.

    Returns None when the data names no classes.

    Raises:
      DataError: when a vocabulary file is named but missing or empty.
    """
    section = resolve_section(data_section)
    vocab = section.get("vocabulary")
    if vocab is None:
        return None
    if isinstance(vocab, list):
        return [str(v) for v in vocab]
    import tensorflow as tf

    if not tf.io.gfile.exists(vocab):
        raise DataError(f"data.vocabulary: the file {vocab!r} does not exist. Give a text file with one class "
                        "name per line (line 1 = label id 0), or a list.", path=vocab)
    with tf.io.gfile.GFile(vocab, "r") as fh:
        names = [line.strip() for line in fh.read().splitlines()]
    while names and not names[-1]:
        names.pop()
    if not names:
        raise DataError(f"data.vocabulary: the file {vocab!r} is empty; write one class name per line.", path=vocab)
    return names


def num_classes(data_section: Mapping[str, Any]) -> int | None:
    """Number of classes: the vocabulary's length, else the manifest's `num_classes`, else None."""
    vocab = vocabulary(data_section)
    if vocab is not None:
        return len(vocab)
    section = resolve_section(data_section)
    n = section.get("_num_classes")
    return int(n) if n is not None else None


def pattern_for(section: Mapping[str, Any], mode: str) -> str | list[str]:
    """The file pattern a mode reads: `data.train` for train, `data.eval` for eval and predict.

    Raises:
      DataError: when the section has no pattern for the mode.
    """
    key = "train" if mode == "train" else "eval"
    pattern = section.get(key)
    if not pattern and mode == "predict":
        pattern = section.get("train")
    if not pattern:
        raise DataError(f"data.{key} is not set; {mode} needs a glob of TFRecord files in data.{key} "
                        "(or a data.manifest that lists the split).")
    return pattern
