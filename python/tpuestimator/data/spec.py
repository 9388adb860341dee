"""What the records hold and what the model receives: formats, feature specs, vocabulary.

Nothing here imports TensorFlow at module level. A `data` section (the config's typed
view, or a dict) is first *resolved* into a `DataSpec`: a `data.manifest` written by the
TFRecord writer supplies the format, feature spec, image size, label and vocabulary, and the
patterns of the train/eval shards; fields set in the config win over the manifest's. The rest
of the data layer reads the `DataSpec`'s fields as attributes.
"""
from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from tpuestimator.config import DEFAULTS
from tpuestimator.data.spec_types import (  # noqa: F401  (imported from here)
    Assertion,
    Augment,
    DataSpec,
    ImageSpec,
    RecordFeature,
)
from tpuestimator.errors import DataError
from tpuestimator.manifest import (  # noqa: F401  (imported from here)
    MANIFEST_NAME,
    MANIFEST_VERSION,
    Manifest,
    load_manifest,
    manifest_path,
    read_manifest_file,
)
from tpuestimator.models.column_spec import ColumnSpec, parse_columns

FORMATS = ("mnist", "flowers", "features")

# The attribute of a config's `data` view (`cfg.data`) that keeps what it resolved into.
RESOLVED = "_resolved_spec"

# Record keys of the MNIST TFRecord format and of TPUEstimator's flowers example.
MNIST_IMAGE_KEY = "image_raw"
MNIST_LABEL_KEY = "label"
FLOWERS_IMAGE_KEY = "image/encoded"
FLOWERS_LABEL_KEY = "image/class/label"
FLOWERS_TEXT_KEY = "image/class/text"

# The data section's defaults: the schema's (`tpuestimator.config.DEFAULTS`).
_SECTION_DEFAULTS: dict[str, Any] = DEFAULTS["data"]


def image_spec(data_section: Mapping[str, Any]) -> ImageSpec:
    """The `image` of a data section as written (an export's metadata), not resolved: no manifest
    is read (what `tpuestimator predict` needs to decode image files like training did)."""
    return ImageSpec(**((data_section or {}).get("image") or {}))


def _folder(path: str) -> str:
    return os.path.dirname(os.path.abspath(path)) if "://" not in path else os.path.dirname(path)


def _section_dict(data_section: Any) -> dict:
    """A data section as the plain dict `resolve_section` fills: a dict (a user's, an export's
    metadata) copied, the config's typed `data` view with its unset fields left out."""
    if dataclasses.is_dataclass(data_section):
        return {f.name: copy.deepcopy(getattr(data_section, f.name)) for f in dataclasses.fields(data_section)
                if getattr(data_section, f.name) is not None}
    return copy.deepcopy(dict(data_section))


def resolve_section(data_section: Mapping[str, Any] | Any) -> DataSpec:
    """The `DataSpec` of a `data` section: defaults and the manifest's fields filled in.

    Args:
      data_section: the config's `data` view (`cfg.data`), a dict (a user's, an export's
        metadata) or a `DataSpec`, which is returned as it is. The view is resolved once: the
        `DataSpec` is kept with it (`RESOLVED`), and a `JobConfig` makes its views once, so a job
        resolves its data section once however many of its parts ask (preflight, the model's
        params, each input, the exports, the hooks); a changed config is a new `JobConfig`.

    Raises:
      DataError: for a section that names no format, or lacks what its format needs.
    """
    if isinstance(data_section, DataSpec):
        return data_section
    kept = getattr(data_section, RESOLVED, None)  # the config's view, resolved once per job
    if kept is not None:
        return kept
    spec = _resolve(data_section)
    if dataclasses.is_dataclass(data_section):
        object.__setattr__(data_section, RESOLVED, spec)  # kept with the (frozen) view, not one of its fields
    return spec


def _resolve(data_section: Mapping[str, Any] | Any) -> DataSpec:
    section = _section_dict(data_section)
    for key, value in _SECTION_DEFAULTS.items():
        section.setdefault(key, copy.deepcopy(value))
    found: dict[str, Any] = {}
    if section.get("manifest"):
        manifest = load_manifest(section["manifest"])
        base = found["manifest_dir"] = _folder(manifest_path(section["manifest"]))
        found["manifest_splits"] = copy.deepcopy(dict(manifest.splits))
        section.setdefault("format", manifest.format)
        for key in ("image", "label", "label_offset", "features"):
            if getattr(manifest, key) is not None and key not in section:
                section[key] = copy.deepcopy(getattr(manifest, key))
        if "vocabulary" not in section and manifest.vocabulary:
            section["vocabulary"] = list(manifest.vocabulary)
        for split in ("train", "eval"):
            info = manifest.split(split)
            if split not in section and info.get("pattern"):
                section[split] = _join(base, info["pattern"])
        if manifest.num_classes is not None:
            found["manifest_num_classes"] = manifest.num_classes
        if manifest.feature_columns:
            from tpuestimator.models.feature_columns import apply_overrides

            # parsed here, once the config's overrides are merged in; a key no column has is named
            # with the manifest's file when the manifest has it, else as the config's field
            parse_columns(manifest.feature_columns, source=manifest_path(section["manifest"]))
            section["feature_columns"] = parse_columns(
                apply_overrides(copy.deepcopy(manifest.feature_columns), section.get("feature_columns")),
                where="data.feature_columns")
        if manifest.task:
            section.setdefault("task", manifest.task)
        if manifest.label_stats:  # a regression label's training mean and std (tables.write)
            found["label_stats"] = copy.deepcopy(manifest.label_stats)
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
        section["image"] = ImageSpec(**{"channels": 3 if fmt == "flowers" else 1, **image})
    elif image:
        section["image"] = ImageSpec(**image)
    else:
        section["image"] = None
    if fmt == "features":
        if not section.get("features"):
            raise DataError("data.features is empty; with data.format 'features' declare each feature "
                            "as {name: {dtype: float32|int64|string, shape: [...]}}.")
    section["augment"] = Augment(**(section.get("augment") or {}))
    section["assertions"] = tuple(Assertion(**a) for a in section.get("assertions") or ())
    # without a manifest: a section as written (an export's metadata holds the merged columns)
    section["feature_columns"] = parse_columns(section.get("feature_columns"), where="data.feature_columns")
    known = {f.name for f in dataclasses.fields(DataSpec)}
    return DataSpec(**{k: v for k, v in section.items() if k in known}, **found)


def _join(base: str, pattern: str) -> str:
    if "://" in pattern or os.path.isabs(pattern):
        return pattern
    return os.path.join(base, pattern)


def record_features(spec: DataSpec, *, with_label: bool = True) -> dict[str, RecordFeature]:
    """The features stored in each record: name -> `RecordFeature` (the parse spec)."""
    label = spec.label
    out: dict[str, RecordFeature] = {}
    if spec.format == "mnist":
        out[MNIST_IMAGE_KEY] = RecordFeature(dtype="string", shape=[], kind="raw_image")
    elif spec.format == "flowers":
        out[FLOWERS_IMAGE_KEY] = RecordFeature(dtype="string", shape=[], kind="jpeg")
    else:
        for name, declared in spec.features.items():
            if name == label:
                continue
            kind = declared.get("kind") or ("string" if declared["dtype"] == "string" else "numeric")
            vocabulary = declared.get("vocabulary")
            if kind in ("raw_image", "jpeg", "png"):
                out[name] = RecordFeature(dtype="string", shape=[], kind=kind, vocabulary=vocabulary,
                                          image_shape=list(declared.get("shape") or _image_shape(spec, name)))
            else:
                out[name] = RecordFeature(dtype=declared["dtype"], shape=list(declared.get("shape") or []), kind=kind,
                                          vocabulary=vocabulary)
    if with_label and label:
        out[label] = RecordFeature(dtype="float32" if is_regression(spec) else "int64", shape=[], kind="label")
    return out


def is_regression(spec: DataSpec) -> bool:
    """True when the records' label is a number to predict (a table written with a regression label)."""
    return spec.task == "regression"


def feature_columns(spec: DataSpec) -> dict[str, ColumnSpec] | None:
    """The table's feature columns (`tpuestimator.models.feature_columns`), None for data that is no table."""
    return dict(spec.feature_columns or {}) or None


def _image_shape(spec: DataSpec, name: str) -> list[int]:
    if not spec.image:
        raise DataError(f"data.features.{name}: an image feature needs a shape [height, width, channels] "
                        "(or a data.image section).", feature=name)
    return spec.image.shape


def model_features(data_section: Any) -> dict[str, tuple[list[int], str]]:
    """What the model receives: name -> (shape without batch, dtype name). No TensorFlow."""
    spec = resolve_section(data_section)
    if spec.format in ("mnist", "flowers"):
        return {"image": (spec.image.shape, "float32")}
    if spec.feature_columns:
        from tpuestimator.models.table_preprocessing import encoded_features

        return encoded_features(spec.feature_columns)
    out = {}
    for name, feature in record_features(spec, with_label=False).items():
        if feature.kind in ("raw_image", "jpeg", "png"):
            out[name] = (list(feature.image_shape), "float32")
        elif feature.dtype == "int64":
            out[name] = (list(feature.shape), "int32")
        else:
            out[name] = (list(feature.shape), feature.dtype)
    return out


def describe_features(data_section: Any) -> dict[str, tuple[tuple[int, ...], Any]]:
    """What shapes and dtypes the model receives, for building a serving signature.

    Returns:
      dict feature name -> (shape without the batch dimension, `tf.DType`). Images are
      float32 ``(height, width, channels)`` (before any `transpose_input`); int64 features
      arrive as int32.
    """
    import tensorflow as tf

    return {name: (tuple(shape), tf.as_dtype(dtype)) for name, (shape, dtype) in model_features(data_section).items()}


def vocabulary(data_section: Any) -> list[str] | None:
    """Class names by label id: from `data.vocabulary` (a list or a text file, one per line) or the manifest.

    Returns None when the data names no classes.

    Raises:
      DataError: when a vocabulary file is named but missing or empty.
    """
    vocab = resolve_section(data_section).vocabulary
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


def num_classes(data_section: Any) -> int | None:
    """Number of classes: the vocabulary's length, else the manifest's `num_classes`, else None."""
    spec = resolve_section(data_section)
    vocab = vocabulary(spec)
    if vocab is not None:
        return len(vocab)
    n = spec.manifest_num_classes
    return int(n) if n is not None else None


def pattern_for(spec: DataSpec, mode: str) -> str | list[str]:
    """The file pattern a mode reads: `data.train` for train, `data.eval` for eval and predict.

    Raises:
      DataError: when the section has no pattern for the mode.
    """
    key = "train" if mode == "train" else "eval"
    pattern = spec.train if mode == "train" else spec.eval
    if not pattern and mode == "predict":
        pattern = spec.train
    if not pattern:
        raise DataError(f"data.{key} is not set; {mode} needs a glob of TFRecord files in data.{key} "
                        "(or a data.manifest that lists the split).")
    return pattern
