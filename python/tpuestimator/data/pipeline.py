"""The input pipeline: TFRecord files -> batches of `(features, labels)`.

`make_input_fn(data_section, mode)` returns `input_fn(params)` per docs/ARCHITECTURE.md.
The pipeline lists and shards the files, interleaves `TFRecordDataset`s, caches raw records
(optional), shuffles and repeats (train only), batches FIRST and then parses each batch with
one vectorised `tf.io.parse_example`, decodes, checks `data.assertions`, augments (train
only), optionally transposes and prefetches.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

import tensorflow as tf

from tpuestimator.data import spec as specs
from tpuestimator.errors import DataError

log = logging.getLogger(__name__)

MODES = ("train", "eval", "predict")
ASSERT_MARKER = "tpuestimator data assertion"
LABEL_MARKER = "tpuestimator label range"
_DTYPES = {"float32": tf.float32, "int64": tf.int64, "string": tf.string}
# Batch size used to parse records before `cache_decoded` (the model batch comes later).
_DECODE_BATCH = 256


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


def make_input_fn(data_section: Mapping[str, Any], mode: str) -> Callable[[dict], tf.data.Dataset]:
    """Builds `input_fn(params) -> tf.data.Dataset` of `(features, labels)` batches.

    Args:
      data_section: the config's `data` section (a manifest, if named, fills the rest).
      mode: "train", "eval" or "predict".

    Returns:
      `input_fn(params)`; `params` holds `batch_size` (per replica), `input_context`
      (`tf.distribute.InputContext` or None), `seed`, `start_step` and optionally
      `num_classes` (used to assert labels are in range when the data names no vocabulary).

    Raises:
      DataError: for a data section that cannot be read (no files, empty files, ...).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    section = specs.resolve_section(data_section)
    pattern = specs.pattern_for(section, mode)
    n_classes = specs.num_classes(section)
    check_assertions(section)

    def input_fn(params: dict) -> tf.data.Dataset:
        params = dict(params or {})
        batch_size = int(params["batch_size"])
        classes = n_classes if n_classes is not None else params.get("num_classes")
        return build_dataset(section, mode, pattern, batch_size=batch_size,
                             input_context=params.get("input_context"),
                             seed=int(params.get("seed") or 0) + int(params.get("start_step") or 0),
                             num_classes=classes)

    input_fn.data_section = section  # for error translation by the caller
    input_fn.mode = mode
    return input_fn


def build_dataset(section: Mapping[str, Any], mode: str, pattern: str | list[str], *, batch_size: int,
                  input_context: Any = None, seed: int = 0, num_classes: int | None = None,
                  check_first_record: bool = True) -> tf.data.Dataset:
    """The dataset `input_fn` returns (see module docstring); `section` must be resolved."""
    train = mode == "train"
    files = list_files(pattern)
    _check_not_empty(files, pattern)
    if check_first_record:
        from tpuestimator.data.diagnose import check_first_record as _check_first

        _check_first(section, files, mode)
    record_shard = None
    if input_context is not None and input_context.num_input_pipelines > 1:
        n, i = input_context.num_input_pipelines, input_context.input_pipeline_id
        if len(files) >= n:
            files = files[i::n]
        else:
            log.warning("%d files for %d input pipelines: sharding by record (each host reads every file); "
                        "write at least %d shards to shard by file", len(files), n, n)
            record_shard = (n, i)

    ds = tf.data.Dataset.from_tensor_slices(files)
    if train and len(files) > 1:
        ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    buffer = int(section["read_buffer_mb"]) * 1024 * 1024
    skip_corrupt = section.get("on_corrupt") == "skip"
    if skip_corrupt:
        from tpuestimator.data.diagnose import register_skipping

        register_skipping(files)

    def read(filename):
        records = tf.data.TFRecordDataset(filename, buffer_size=buffer)
        if skip_corrupt:
            records = records.ignore_errors(log_warning=True)
        return records

    cycle = max(1, min(int(section["cycle_length"]), len(files)))
    ds = ds.interleave(read, cycle_length=cycle, block_length=1, num_parallel_calls=tf.data.AUTOTUNE,
                       deterministic=bool(section["deterministic"]))
    if record_shard:
        ds = ds.shard(*record_shard)
    if section.get("cache"):
        ds = ds.cache()

    decode = make_batch_decoder(section, mode, num_classes=num_classes)
    augment = make_augmenter(section) if train else None
    if section.get("cache_decoded"):
        ds = ds.batch(_DECODE_BATCH).map(decode, num_parallel_calls=tf.data.AUTOTUNE).unbatch().cache()
        if train:
            ds = ds.shuffle(int(section["shuffle_buffer"]), seed=seed, reshuffle_each_iteration=True).repeat()
        ds = ds.batch(batch_size, drop_remainder=train)
        if augment is not None:
            ds = ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE)
    else:
        if train:
            ds = ds.shuffle(int(section["shuffle_buffer"]), seed=seed, reshuffle_each_iteration=True).repeat()
        ds = ds.batch(batch_size, drop_remainder=train)
        if augment is not None:
            ds = ds.map(lambda s: augment(*decode(s)), num_parallel_calls=tf.data.AUTOTUNE)
        else:
            ds = ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
    if train:
        ds = ds.map(_static_batch(batch_size))
    if section.get("transpose_input"):
        ds = ds.map(_transpose, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.prefetch(tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.deterministic = bool(section["deterministic"])
    options.experimental_optimization.map_parallelization = True
    return ds.with_options(options)


def check_assertions(section: Mapping[str, Any]) -> None:
    """Checks that every `data.assertions` entry names a feature the model receives.

    Raises:
      DataError: naming the unknown feature and the known ones.
    """
    known = specs.model_features(section)
    for a in section.get("assertions") or []:
        name = a["feature"]
        if name not in known:
            raise DataError(f"data.assertions: feature {name!r} is not one the model receives "
                            f"({', '.join(known)}); image formats call the image 'image'.", feature=name)
        if known[name][1] == "string" and any(k in a for k in ("min", "max", "finite", "non_negative")):
            raise DataError(f"data.assertions: feature {name!r} holds strings; only `shape` can be asserted.",
                            feature=name)


def _check_not_empty(files: list[str], pattern) -> None:
    sizes = [tf.io.gfile.stat(f).length for f in files]
    if sum(sizes) == 0:
        raise DataError(f"The files matching {pattern!r} are empty ({len(files)} file(s), 0 bytes): no records "
                        "to read. Rewrite them with `tpuestimator data write`.", path=files[0], record=0)
    for f, size in zip(files, sizes):
        if size == 0:
            log.warning("%s is empty (0 bytes); it contributes no records", f)


def _static_batch(batch_size: int):
    def fn(features, labels):
        features = {k: tf.ensure_shape(v, [batch_size] + v.shape[1:].as_list()) for k, v in features.items()}
        return features, tf.ensure_shape(labels, [batch_size])
    return fn


def _transpose(features, labels):
    out = dict(features)
    if "image" in out:  # [b, h, w, c] -> [h, w, c, b] (seed 000's TPU trick)
        out["image"] = tf.transpose(out["image"], [1, 2, 3, 0])
    return out, labels


def parse_spec(section: Mapping[str, Any], mode: str) -> dict[str, Any]:
    """The `tf.io.parse_example` feature spec of the records (label optional in predict)."""
    out = {}
    label = section.get("label")
    for name, spec in specs.record_features(section).items():
        if spec["kind"] == "label":
            default = (section.get("label_offset", 0) - 1) if mode == "predict" else None
            out[name] = tf.io.FixedLenFeature([], tf.int64, default_value=default)
        else:
            out[name] = tf.io.FixedLenFeature(spec["shape"], _DTYPES[spec["dtype"]])
    if label is None and mode != "predict":
        raise DataError("data.label is not set; with data.format 'features' name the int64 label feature "
                        "in data.label (labels are ids from 0; class names go in data.vocabulary).")
    return out


def make_batch_decoder(section: Mapping[str, Any], mode: str, *, num_classes: int | None = None,
                       for_augment: bool | None = None) -> Callable:
    """`decode(serialized [b]) -> (features, labels int32 [b])`: one `parse_example` per batch.

    Images are decoded (to `height+pad` when train-mode random cropping follows), scaled and
    checked against `data.assertions`; labels are shifted by `label_offset` and checked to
    lie in `[0, num_classes)` when the number of classes is known.
    """
    fmt = section["format"]
    pspec = parse_spec(section, mode)
    label_key = section.get("label")
    offset = int(section.get("label_offset", 0))
    train = mode == "train"
    aug = section.get("augment") or {}
    pad = 10 if (train and aug.get("random_crop") and fmt == "flowers") else 0
    image = section.get("image") or {}
    # With augmentation on, images stay in [0, 1] until the augmenter has run (then it scales).
    img_scale = "unit" if (train and augmentation_active(section)) else image.get("scale", "unit")
    assertions = list(section.get("assertions") or [])

    def decode(serialized):
        parsed = tf.io.parse_example(serialized, pspec)
        features: dict[str, tf.Tensor] = {}
        if fmt == "mnist":
            features["image"] = _raw_image(parsed[specs.MNIST_IMAGE_KEY],
                                           [image["height"], image["width"], image["channels"]], img_scale)
        elif fmt == "flowers":
            features["image"] = _encoded_images(parsed[specs.FLOWERS_IMAGE_KEY],
                                                [image["height"] + pad, image["width"] + pad, image["channels"]],
                                                image.get("decode_ratio", 1), img_scale)
        else:
            for name, fspec in specs.record_features(section, with_label=False).items():
                value = parsed[name]
                kind = fspec["kind"]
                scale = (image or {}).get("scale", "unit")
                if kind == "raw_image":
                    value = _raw_image(value, fspec["image_shape"], scale)
                elif kind in ("jpeg", "png"):
                    value = _encoded_images(value, fspec["image_shape"], 1, scale)
                elif value.dtype == tf.int64:
                    value = tf.cast(value, tf.int32)
                features[name] = value
        if label_key and label_key in parsed:
            labels = tf.cast(parsed[label_key], tf.int32) - offset
            if num_classes is not None and mode != "predict":
                labels = _assert_labels(labels, num_classes, offset)
        else:
            labels = tf.fill(tf.shape(serialized)[:1], -1)
        if assertions:
            features = _apply_assertions(features, assertions, fmt)
        return features, labels

    return decode


def _raw_image(raw: tf.Tensor, shape: list[int], scale: str) -> tf.Tensor:
    pixels = tf.io.decode_raw(raw, tf.uint8)
    images = tf.reshape(pixels, [-1] + list(shape))
    return _scale(tf.cast(images, tf.float32) * (1.0 / 255.0), scale)


def _scale(unit_images: tf.Tensor, scale: str) -> tf.Tensor:
    if scale == "symmetric":
        return (unit_images - 0.5) * 2.0
    return unit_images


def _encoded_images(encoded: tf.Tensor, shape: list[int], ratio: int, scale: str) -> tf.Tensor:
    """Decodes a batch of JPEG/PNG strings to float32 [b, h, w, c] in [0, 1] (then scaled)."""
    height, width, channels = shape

    def one(data):
        if ratio and ratio > 1:
            img = tf.cond(tf.io.is_jpeg(data),
                          lambda: tf.io.decode_jpeg(data, channels=channels, ratio=ratio),
                          lambda: tf.io.decode_png(data, channels=channels))
        else:
            img = tf.io.decode_image(data, channels=channels, expand_animations=False)
        img = tf.image.convert_image_dtype(img, tf.float32)
        img = tf.image.resize(img, [height, width], method="bilinear")
        return tf.ensure_shape(img, [height, width, channels])

    images = tf.map_fn(one, encoded, fn_output_signature=tf.TensorSpec([height, width, channels], tf.float32),
                       parallel_iterations=16)
    return _scale(images, scale)


def _assert_labels(labels: tf.Tensor, num_classes: int, offset: int) -> tf.Tensor:
    ok = tf.logical_and(labels >= 0, labels < num_classes)
    check = tf.debugging.Assert(tf.reduce_all(ok), [
        f"{LABEL_MARKER}: labels must lie in [0, {num_classes}) after subtracting data.label_offset={offset}; "
        "offending stored labels:", tf.boolean_mask(labels + offset, tf.logical_not(ok))], summarize=10)
    with tf.control_dependencies([check]):
        return tf.identity(labels)


def _apply_assertions(features: dict, assertions: list[dict], fmt: str) -> dict:
    out = dict(features)
    for a in assertions:
        name = a["feature"]
        x = out[name]
        checks = []
        xf = tf.cast(x, tf.float32) if x.dtype != tf.string else None
        flat = tf.reshape(xf, [tf.shape(xf)[0], -1]) if xf is not None else None

        def bad_values(mask, flat=flat):
            return tf.boolean_mask(flat, mask)

        if "shape" in a:
            want = list(a["shape"])
            checks.append(tf.debugging.Assert(
                tf.reduce_all(tf.equal(tf.shape(x)[1:], want)),
                [f"{ASSERT_MARKER}: feature {name!r} shape must be {want}, got", tf.shape(x)[1:]]))
        if flat is not None:
            if a.get("finite"):
                bad = tf.logical_not(tf.math.is_finite(flat))
                checks.append(tf.debugging.Assert(tf.logical_not(tf.reduce_any(bad)), [
                    f"{ASSERT_MARKER}: feature {name!r} must be finite; offending values:", bad_values(bad)],
                    summarize=10))
            lo = a.get("min", 0.0 if a.get("non_negative") else None)
            if a.get("non_negative") and a.get("min") is not None:
                lo = max(0.0, float(a["min"]))
            if lo is not None:
                bad = flat < float(lo)
                checks.append(tf.debugging.Assert(tf.logical_not(tf.reduce_any(bad)), [
                    f"{ASSERT_MARKER}: feature {name!r} must be >= {lo}; offending values:", bad_values(bad)],
                    summarize=10))
            if a.get("max") is not None:
                bad = flat > float(a["max"])
                checks.append(tf.debugging.Assert(tf.logical_not(tf.reduce_any(bad)), [
                    f"{ASSERT_MARKER}: feature {name!r} must be <= {a['max']}; offending values:", bad_values(bad)],
                    summarize=10))
        if checks:
            with tf.control_dependencies(checks):
                out[name] = tf.identity(x)
    return out


def augmentation_active(section: Mapping[str, Any]) -> bool:
    """Whether train mode augments: an image format with any `data.augment` switch on."""
    aug = section.get("augment") or {}
    return section["format"] in ("mnist", "flowers") and any(bool(v) for v in aug.values())


def make_augmenter(section: Mapping[str, Any]) -> Callable | None:
    """Train-time augmentation of a batch, per image (seed 000's crop / flip / brightness / contrast).

    Returns None when no augmentation is switched on or the data has no "image" feature.
    """
    aug = section.get("augment") or {}
    if not augmentation_active(section):
        return None
    image = section["image"]
    height, width = image["height"], image["width"]
    crop = bool(aug.get("random_crop")) and section["format"] == "flowers"
    flip = bool(aug.get("flip_left_right"))
    brightness = float(aug.get("brightness") or 0.0)
    contrast = aug.get("contrast")
    scale = image["scale"]

    def augment(features, labels):
        x = features["image"]
        b = tf.shape(x)[0]
        if crop:  # images were decoded at (h+10, w+10): pixel-exact random crop per image
            ph, pw = tf.shape(x)[1], tf.shape(x)[2]
            oy = tf.cast(tf.random.uniform([b], 0, ph - height + 1, dtype=tf.int32), tf.float32)
            ox = tf.cast(tf.random.uniform([b], 0, pw - width + 1, dtype=tf.int32), tf.float32)
            hden, wden = tf.cast(ph - 1, tf.float32), tf.cast(pw - 1, tf.float32)
            boxes = tf.stack([oy / hden, ox / wden, (oy + height - 1) / hden, (ox + width - 1) / wden], axis=1)
            x = tf.image.crop_and_resize(x, boxes, tf.range(b), [height, width])
        if flip:
            x = tf.image.random_flip_left_right(x)
        if brightness:
            x = x + tf.random.uniform([b, 1, 1, 1], -brightness, brightness)
        if contrast:
            factor = tf.random.uniform([b, 1, 1, 1], float(contrast[0]), float(contrast[1]))
            mean = tf.reduce_mean(x, axis=[1, 2], keepdims=True)
            x = (x - mean) * factor + mean
        if brightness or contrast:
            x = tf.clip_by_value(x, 0.0, 1.0)
        x = _scale(x, scale)  # the decoder left the images in [0, 1] for augmentation
        out = dict(features)
        out["image"] = x
        return out, labels

    return augment


def parse_serialized(data_section: Mapping[str, Any], serialized: tf.Tensor) -> dict[str, tf.Tensor]:
    """Eval-mode features of a batch of serialized `tf.Example`s (for a serving signature)."""
    section = specs.resolve_section(data_section)
    features, _ = make_batch_decoder(section, "predict")(serialized)
    return features
