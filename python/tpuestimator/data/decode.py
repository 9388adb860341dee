"""Record decoding: file listing, the `tf.io.parse_example` spec, the batch decoder of every
record format, and decoding of image files at serving time.

Shared by the input pipeline (`pipeline.py`), the record diagnosis (`diagnose.py`) and
prediction from raw files (`tpuestimator.serving.exports.predict`); imports neither of them.
"""
from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from tpuestimator.data import spec as specs
from tpuestimator.data.assertions import apply_assertions, assert_label_range
from tpuestimator.data.augment import augmentation_active, position_seed, scale_pixels
from tpuestimator.errors import DataError
from tpuestimator.models.table_preprocessing import preprocessor_for
from tpuestimator.system.graph_code import as_written

log = logging.getLogger(__name__)

_DTYPES = {"float32": tf.float32, "int64": tf.int64, "string": tf.string}
# Batch size used to parse records before `cache_decoded` (the model batch comes later).
DECODE_BATCH = 256


def list_files(pattern: str | list[str]) -> list[str]:
    """Sorted files matching a glob (or a list of globs).

    Raises:
      DataError: naming the pattern when nothing matches.
    """
    patterns = [pattern] if isinstance(pattern, str) else list(pattern)
    files: list[str] = []
    for pat in patterns:
        matched = sorted(tf.io.gfile.glob(pat))
        if not matched:
            raise DataError(f"No files match the pattern {pat!r}. Check data.train / data.eval (paths are "
                            "relative to the config file) or write records with `tpuestimator data write`.",
                            path=pat)
        files.extend(matched)
    return files


def parse_spec(spec: specs.DataSpec, mode: str) -> dict[str, Any]:
    """The `tf.io.parse_example` feature spec of the records (label optional in predict)."""
    out = {}
    columns = specs.feature_columns(spec) or {}
    for name, feature in specs.record_features(spec).items():
        if feature.kind == "label":
            if specs.is_regression(spec):
                out[name] = tf.io.FixedLenFeature([], tf.float32, default_value=0.0 if mode == "predict" else None)
                continue
            default = (spec.label_offset - 1) if mode == "predict" else None
            out[name] = tf.io.FixedLenFeature([], tf.int64, default_value=default)
        else:
            # a table column with a missing-value policy: records leave a missing value out
            default = columns[name].missing_default() if name in columns else None
            out[name] = tf.io.FixedLenFeature(feature.shape, _DTYPES[feature.dtype], default_value=default)
    if spec.label is None and mode != "predict":
        raise DataError("data.label is not set; with data.format 'features' name the int64 label feature "
                        "in data.label (labels are ids from 0; class names go in data.vocabulary).")
    return out


@as_written  # its instances are called as written (graph_code.as_written: the class carries the mark)
class BatchDecoder:
    """Turns serialized records into `(features, labels int32 [b])`, one `parse_example` per batch.

    Stages (the pipeline runs them separately so JPEG/PNG decoding runs in parallel per image):
    `parse(serialized [b]) -> parsed dict`, `decode_one(parsed record) -> record with decoded
    images` (only when `encoded` is non-empty), `finish(parsed batch) -> (features, labels)`.
    Calling the decoder runs all three on a batch (images decoded with `tf.map_fn`).

    Images are decoded (to `height+10` when train-mode random cropping follows), scaled and
    checked against `data.assertions`; labels are shifted by `label_offset` and checked to
    lie in `[0, num_classes)` when the number of classes is known.
    """

    def __init__(self, spec: specs.DataSpec, mode: str, *, num_classes: int | None = None,
                 image_augment: Callable | None = None):
        self.spec = spec
        self.mode = mode
        self.fmt = spec.format
        self.pspec = parse_spec(spec, mode)
        self.label_key = spec.label
        self.offset = int(spec.label_offset)
        self.num_classes = num_classes
        self.image = spec.image or specs.ImageSpec()
        train = mode == "train"
        self.image_augment = image_augment
        # Train-time random crops cut an (h, w) window from the image resized to (h + 10, w + 10) as in
        # the flowers example; a per-image augmenter crops from the decoded image directly, else decode padded.
        pad = 10 if (train and spec.augment.random_crop and self.fmt == "flowers" and image_augment is None) else 0
        # With augmentation on, images stay in [0, 1] until the augmenter has run (then it scales).
        self.img_scale = "unit" if (train and augmentation_active(spec)) else self.image.scale
        self.assertions = list(spec.assertions)
        self.features = specs.record_features(spec, with_label=False)
        columns = specs.feature_columns(spec)
        # a table: raw values -> the model's numbers, here on the host (string lookups cannot run on a TPU)
        # (`table_raw` specs feed an export's signatures, which take the raw values)
        self.table = preprocessor_for(columns) if columns and not spec.table_raw else None
        self.table_columns = bool(columns)
        self.regression = specs.is_regression(spec)
        self.encoded: dict[str, tuple[list[int], int]] = {}
        if self.fmt == "flowers":
            img = self.image
            self.encoded[specs.FLOWERS_IMAGE_KEY] = ([img.height + pad, img.width + pad, img.channels],
                                                     int(img.decode_ratio))
        elif self.fmt == "features":
            for name, feature in self.features.items():
                if feature.kind in ("jpeg", "png"):
                    self.encoded[name] = (list(feature.image_shape), 1)

    @as_written  # plain graph code, also where a serving signature calls it (system/graph_code.py)
    def parse(self, serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        return tf.io.parse_example(serialized, self.pspec)

    @as_written
    def decode_one(self, record: dict[str, tf.Tensor], seed: tf.Tensor | None = None) -> dict[str, tf.Tensor]:
        """One parsed record -> decoded (and, with a per-image augmenter, augmented with `seed`)."""
        out = dict(record)
        for key, (shape, ratio) in self.encoded.items():
            if self.image_augment is not None and key == specs.FLOWERS_IMAGE_KEY:
                out[key] = self.image_augment(_decode_pixels(record[key], shape[2], ratio), 255.0, seed)
            else:
                out[key] = _decode_image(record[key], shape, ratio)
        return out

    @as_written
    def decode_batch(self, parsed: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        out = dict(parsed)
        for key, (shape, ratio) in self.encoded.items():
            out[key] = tf.map_fn(lambda d, shape=shape, ratio=ratio: _decode_image(d, shape, ratio), parsed[key],
                                 fn_output_signature=tf.TensorSpec(shape, tf.float32))
        return out

    @as_written
    def finish(self, parsed: dict[str, tf.Tensor]):
        features: dict[str, tf.Tensor] = {}
        img = self.image
        if self.fmt == "mnist":
            features["image"] = _raw_image(parsed[specs.MNIST_IMAGE_KEY], img.shape, self.img_scale)
        elif self.fmt == "flowers":
            features["image"] = scale_pixels(parsed[specs.FLOWERS_IMAGE_KEY], self.img_scale)
        else:
            scale = img.scale
            for name, feature in self.features.items():
                value = parsed[name]
                kind = feature.kind
                if kind == "raw_image":
                    value = _raw_image(value, feature.image_shape, scale)
                elif kind in ("jpeg", "png"):
                    value = scale_pixels(value, scale)
                elif value.dtype == tf.int64 and not self.table_columns:
                    value = tf.cast(value, tf.int32)
                features[name] = value
            if self.table is not None:
                features = self.table(features)
        if self.regression and self.label_key in parsed:
            labels = parsed[self.label_key]
        elif self.label_key and self.label_key in parsed:
            labels = tf.cast(parsed[self.label_key], tf.int32) - self.offset
            if self.num_classes is not None and self.mode != "predict":
                labels = assert_label_range(labels, self.num_classes, self.offset)
        else:
            first = next(iter(parsed.values()))
            labels = tf.fill(tf.shape(first)[:1], -1)
        if self.assertions:
            features = apply_assertions(features, self.assertions, self.fmt)
        return features, labels

    @as_written
    def __call__(self, serialized: tf.Tensor):
        parsed = self.parse(serialized)
        if self.encoded:
            if self.image_augment is not None:
                raise ValueError("a decoder with a per-image augmenter runs through `batches()`")
            parsed = self.decode_batch(parsed)
        return self.finish(parsed)

    def batches(self, ds: tf.data.Dataset, batch_size: int, *, drop_remainder: bool,
                augment: Callable | None = None, post: Callable | None = None, batched: bool = False,
                seed: int = 0, first_batch: int = 0) -> tf.data.Dataset:
        """Serialized records (or, with `batched`, batches of them) -> decoded `(features, labels)` batches.

        `augment(features, labels, seed)` runs on each decoded batch when given, then
        `post(features, labels)`. The stateless seeds of `augment` and of the per-image
        augmenter come from `seed` and the batch's (image's) position in the stream, counted
        from `first_batch` (the batches a resumed training skipped), so a position is
        augmented the same way in every run.
        """
        def finish(parsed, index=None):
            features, labels = self.finish(parsed)
            if augment is not None:
                features, labels = augment(features, labels, position_seed(seed, index))
            return (features, labels) if post is None else post(features, labels)

        if not batched:
            ds = ds.batch(batch_size, drop_remainder=drop_remainder)
        if self.encoded:  # JPEG/PNG: parse per batch, decode (and augment) each image in parallel
            ds = ds.map(as_written(self.parse), num_parallel_calls=tf.data.AUTOTUNE).unbatch()
            if self.image_augment is not None:
                ds = ds.enumerate(start=first_batch * batch_size).map(
                    as_written(lambda i, record: self.decode_one(record, position_seed(seed, i))),
                    num_parallel_calls=tf.data.AUTOTUNE)
            else:
                ds = ds.map(as_written(self.decode_one), num_parallel_calls=tf.data.AUTOTUNE)
            ds = ds.batch(batch_size, drop_remainder=drop_remainder)
            parse = None
        else:
            parse = self.parse
        if augment is None:
            return ds.map(as_written(lambda s: finish(parse(s) if parse else s)), num_parallel_calls=tf.data.AUTOTUNE)
        return ds.enumerate(start=first_batch).map(as_written(lambda i, s: finish(parse(s) if parse else s, i)),
                                                   num_parallel_calls=tf.data.AUTOTUNE)


def make_batch_decoder(spec: specs.DataSpec, mode: str, *, num_classes: int | None = None,
                       image_augment: Callable | None = None) -> BatchDecoder:
    """The `BatchDecoder` for a resolved data section and mode (callable on a batch of records)."""
    return BatchDecoder(spec, mode, num_classes=num_classes, image_augment=image_augment)


@as_written
def _raw_image(raw: tf.Tensor, shape: list[int], scale: str) -> tf.Tensor:
    pixels = tf.io.decode_raw(raw, tf.uint8)
    images = tf.reshape(pixels, [-1] + list(shape))
    return scale_pixels(tf.cast(images, tf.float32) * (1.0 / 255.0), scale)


@as_written
def _decode_pixels(data: tf.Tensor, channels: int, ratio: int) -> tf.Tensor:
    """One JPEG/PNG string -> uint8 [H, W, channels] at its own size (1/ratio for JPEGs)."""
    if ratio and ratio > 1:  # JPEGs decode at 1/ratio size (much faster for large photos)
        return tf.cond(tf.io.is_jpeg(data),
                       lambda: tf.io.decode_jpeg(data, channels=channels, ratio=ratio),
                       lambda: tf.io.decode_png(data, channels=channels))
    return tf.io.decode_image(data, channels=channels, expand_animations=False)


@as_written
def _decode_image(data: tf.Tensor, shape: list[int], ratio: int) -> tf.Tensor:
    """One JPEG/PNG string -> float32 [h, w, c] in [0, 1], resized (bilinear) to `shape`."""
    height, width, channels = shape
    pixels = _decode_pixels(data, channels, ratio)
    img = tf.image.resize(pixels, [height, width], method="bilinear") * (1.0 / 255.0)  # uint8s: faster
    return tf.ensure_shape(img, [height, width, channels])


@as_written
def parse_serialized(data_section: Any, serialized: tf.Tensor) -> dict[str, tf.Tensor]:
    """Eval-mode features of a batch of serialized `tf.Example`s (for a serving signature)."""
    spec = specs.resolve_section(data_section)
    features, _ = make_batch_decoder(spec, "predict")(tf.convert_to_tensor(serialized))
    return features


@as_written
def image_input(data_section: Any) -> tuple[str, list[int], int, str] | None:
    """The one image input of an image model: (feature name, [height, width, channels], JPEG
    decode ratio, record kind), or None when the data is not one image (tabular or several
    features). Record kind: "raw" (raw pixel bytes in the records) or "encoded" (JPEG/PNG)."""
    spec = specs.resolve_section(data_section)
    if spec.format == "mnist":
        return "image", spec.image.shape, 1, "raw"
    if spec.format == "flowers":
        return "image", spec.image.shape, int(spec.image.decode_ratio), "encoded"
    features = specs.record_features(spec, with_label=False)
    if len(features) == 1:
        name, feature = next(iter(features.items()))
        if feature.kind in ("raw_image", "jpeg", "png"):
            return name, list(feature.image_shape), 1, "raw" if feature.kind == "raw_image" else "encoded"
    return None


@as_written
def image_bytes_features(data_section: Any, images: tf.Tensor) -> dict[str, tf.Tensor]:
    """A batch of JPEG/PNG strings -> the features an image model saw in evaluation (for a serving
    signature taking raw image bytes): each image decoded with the channels of the data, resized
    (bilinear) to its height and width, scaled by `data.image.scale`, checked by `data.assertions`
    — the eval decoder's own steps (`BatchDecoder.decode_batch` + `finish` for JPEG/PNG records).

    Raises:
      DataError: when the data is not one image per example.
    """
    spec = specs.resolve_section(data_section)
    found = image_input(spec)
    if found is None:
        raise DataError("Raw image bytes need an image model: data.format 'mnist' or 'flowers', or one "
                        "image feature in data.features.")
    name, shape, ratio, kind = found
    decoder = make_batch_decoder(spec, "predict")
    images = tf.convert_to_tensor(images, tf.string)
    if kind == "encoded":  # the records hold JPEG/PNG: exactly the eval path from the parsed bytes on
        key = specs.FLOWERS_IMAGE_KEY if spec.format == "flowers" else name
        features, _ = decoder.finish(decoder.decode_batch({key: images}))
        return features
    # Raw-pixel records: the eval path decodes uint8 pixels and scales them by 1/255; decoding the
    # image file to uint8 (resized when its size differs) then scaling is the same computation.
    pixels = tf.map_fn(lambda d: _decode_image(d, shape, ratio), images,
                       fn_output_signature=tf.TensorSpec(shape, tf.float32))
    features = {name: scale_pixels(pixels, spec.image.scale if spec.image else "unit")}
    if decoder.assertions:
        features = apply_assertions(features, decoder.assertions, decoder.fmt)
    return features


def decode_image_files(paths: list[str], image: specs.ImageSpec):
    """Image files (JPEG/PNG/...) -> float32 array [n, height, width, channels] as the model
    saw them in training: resized to `image.height` x `image.width`, pixels scaled by
    `image.scale` (`augment.scale_pixels`)."""
    import numpy as np

    h, w, c = image.height, image.width, image.channels
    scale = image.scale
    out = []
    for p in paths:
        try:
            img = tf.io.decode_image(tf.io.read_file(p), channels=c, expand_animations=False)
        except tf.errors.InvalidArgumentError as exc:  # empty, truncated or not an image at all
            raise image_error(p, exc) from None
        img = tf.image.resize(tf.image.convert_image_dtype(img, tf.float32), [h, w])
        out.append(scale_pixels(img, scale).numpy())
    return np.stack(out)


def image_error(path: str, exc: BaseException) -> DataError:
    """The `DataError` for an image file TensorFlow could not decode (empty, truncated, not an image)."""
    message = getattr(exc, "message", str(exc))
    detail = "the file is empty" if os.path.getsize(path) == 0 else \
        re.sub(r"\{\{[^}]*\}\}\s*", "", message).split(" [Op:")[0].strip().rstrip(".")
    return DataError(f"{path}: cannot be decoded as an image ({detail}). Pass JPEG, PNG, GIF, BMP or WebP files, "
                     "or re-save this one.", path=path)


def undecodable_image(paths: list[str]) -> DataError | None:
    """The `DataError` for the first of `paths` that does not decode as an image, or None (used
    after an export's in-graph decoding failed, to name the file)."""
    for p in paths:
        try:
            tf.io.decode_image(tf.io.read_file(p), expand_animations=False)
        except tf.errors.InvalidArgumentError as exc:
            return image_error(p, exc)
    return None
