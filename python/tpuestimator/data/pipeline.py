"""The input pipeline: TFRecord files -> batches of `(features, labels)`.

`make_input_fn(data_section, mode)` returns `input_fn(params)` per docs/ARCHITECTURE.md.
The pipeline lists and shards the files, interleaves `TFRecordDataset`s, caches raw records
(optional), repeats and shuffles (train only: windows of `shuffle_buffer` records permuted
in one op each), batches FIRST and then parses each batch with one vectorised
`tf.io.parse_example`, decodes (JPEG/PNG per image, in parallel), checks `data.assertions`,
augments (train only), optionally transposes and prefetches.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

import tensorflow as tf

from tpuestimator.data import spec as specs
from tpuestimator.data.assertions import ASSERT_MARKER, LABEL_MARKER  # noqa: F401  (re-exported)
from tpuestimator.data.assertions import apply_assertions, assert_label_range, check_assertions
from tpuestimator.data.augment import augmentation_active, make_augmenter, make_image_augmenter, scale_pixels
from tpuestimator.errors import DataError

log = logging.getLogger(__name__)

MODES = ("train", "eval", "predict")
_DTYPES = {"float32": tf.float32, "int64": tf.int64, "string": tf.string}
# Batch size used to parse records before `cache_decoded` (the model batch comes later).
_DECODE_BATCH = 256
# Records per element read from each file: interleaving, caching and shuffling handle chunks, not
# single records (25% less CPU per record than record-level interleaving, benchmarks/input_results.md).
_CHUNK = 16


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

    def read(filename):  # chunks of up to _CHUNK records: the per-element costs below are paid per chunk
        records = tf.data.TFRecordDataset(filename, buffer_size=buffer)
        if skip_corrupt:
            records = records.ignore_errors(log_warning=True)
        return records.batch(_CHUNK)

    cycle = max(1, min(int(section["cycle_length"]), len(files)))
    if any("://" in f for f in files):  # remote storage: parallel reads hide the latency
        ds = ds.interleave(read, cycle_length=cycle, block_length=1, num_parallel_calls=tf.data.AUTOTUNE,
                           deterministic=bool(section["deterministic"]))
    else:  # local files: a plain round robin over `cycle` files costs a third of the CPU per record
        ds = ds.interleave(read, cycle_length=cycle, block_length=1)
    if record_shard:  # whole chunks per pipeline: still a disjoint split
        ds = ds.shard(*record_shard)
    if section.get("cache"):
        ds = ds.cache()

    cache_decoded = bool(section.get("cache_decoded"))
    image_aug = make_image_augmenter(section) if train else None  # per image (JPEG/PNG formats)
    batch_aug = make_augmenter(section) if train else None  # per batch (raw pixel formats)
    decoder = make_batch_decoder(section, mode, num_classes=num_classes,
                                 image_augment=None if cache_decoded else image_aug)
    shuffle_buffer = int(section["shuffle_buffer"])
    static = _static_batch(batch_size) if train else None
    if cache_decoded:  # decode once, then shuffle / augment the decoded images every epoch
        ds = decoder.batches(ds.rebatch(_DECODE_BATCH), _DECODE_BATCH, drop_remainder=False, batched=True)
        ds = ds.unbatch().cache()
        if train:
            ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat()
        if image_aug is not None:
            ds = ds.map(lambda f, lab: ({**f, "image": image_aug(f["image"], 1.0)}, lab),
                        num_parallel_calls=tf.data.AUTOTUNE)
        ds = ds.batch(batch_size, drop_remainder=train)
        post = _compose(batch_aug, static)
        if post is not None:
            ds = ds.map(post, num_parallel_calls=tf.data.AUTOTUNE)
    else:
        if train:
            ds = window_shuffle(ds.repeat(), shuffle_buffer, batch_size, seed)
        else:
            ds = ds.rebatch(batch_size, drop_remainder=False)
        ds = decoder.batches(ds, batch_size, drop_remainder=train, augment=_compose(batch_aug, static),
                             batched=True)
    if section.get("transpose_input"):
        ds = ds.map(_transpose, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.prefetch(tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.deterministic = bool(section["deterministic"])
    options.experimental_optimization.map_parallelization = True
    return ds.with_options(options)


def window_shuffle(chunks: tf.data.Dataset, buffer: int, batch_size: int, seed: int) -> tf.data.Dataset:
    """Shuffled batches of serialized records from an endless stream of record chunks (1-D string tensors).

    Consecutive windows of `buffer` records (rounded up to a multiple of `batch_size`) are
    each permuted uniformly (stateless, seeded by `seed` and the window index, so the order
    is reproducible even with parallel calls) and cut into batches. Unlike a sliding
    `Dataset.shuffle` buffer, whose per-record work runs on the single input thread, the
    permutation is one vectorised op per window in a parallel map: measured 2.5x the
    records/s of `shuffle(1024)` on 28x28 records (benchmarks/input_results.md).
    """
    window = max(1, -(-int(buffer) // batch_size)) * batch_size
    seed_t = tf.constant(int(seed), tf.int64)

    def permute(index, block):
        return tf.random.experimental.stateless_shuffle(block, seed=tf.stack([seed_t, index]))

    ds = chunks.rebatch(window, drop_remainder=True).enumerate()
    ds = ds.map(permute, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.rebatch(batch_size, drop_remainder=True)


def _compose(*fns):
    """f(features, labels) pipelines: the given functions (None skipped) applied in order."""
    fns = [f for f in fns if f is not None]
    if not fns:
        return None

    def run(features, labels):
        for f in fns:
            features, labels = f(features, labels)
        return features, labels
    return run


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

    def __init__(self, section: Mapping[str, Any], mode: str, *, num_classes: int | None = None,
                 image_augment: Callable | None = None):
        self.section = section
        self.mode = mode
        self.fmt = section["format"]
        self.pspec = parse_spec(section, mode)
        self.label_key = section.get("label")
        self.offset = int(section.get("label_offset", 0))
        self.num_classes = num_classes
        self.image = section.get("image") or {}
        train = mode == "train"
        aug = section.get("augment") or {}
        self.image_augment = image_augment
        # Train-time random crops cut an (h, w) window from the image resized to (h + 10, w + 10) as in
        # seed 000; a per-image augmenter crops from the decoded image directly, else decode padded.
        pad = 10 if (train and aug.get("random_crop") and self.fmt == "flowers" and image_augment is None) else 0
        # With augmentation on, images stay in [0, 1] until the augmenter has run (then it scales).
        self.img_scale = "unit" if (train and augmentation_active(section)) else self.image.get("scale", "unit")
        self.assertions = list(section.get("assertions") or [])
        self.features = specs.record_features(section, with_label=False)
        self.encoded: dict[str, tuple[list[int], int]] = {}
        if self.fmt == "flowers":
            img = self.image
            self.encoded[specs.FLOWERS_IMAGE_KEY] = ([img["height"] + pad, img["width"] + pad, img["channels"]],
                                                     int(img.get("decode_ratio", 1)))
        elif self.fmt == "features":
            for name, fspec in self.features.items():
                if fspec["kind"] in ("jpeg", "png"):
                    self.encoded[name] = (list(fspec["image_shape"]), 1)

    def parse(self, serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        return tf.io.parse_example(serialized, self.pspec)

    def decode_one(self, record: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        out = dict(record)
        for key, (shape, ratio) in self.encoded.items():
            if self.image_augment is not None and key == specs.FLOWERS_IMAGE_KEY:
                out[key] = self.image_augment(_decode_pixels(record[key], shape[2], ratio), 255.0)
            else:
                out[key] = _decode_image(record[key], shape, ratio)
        return out

    def decode_batch(self, parsed: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        out = dict(parsed)
        for key, (shape, ratio) in self.encoded.items():
            out[key] = tf.map_fn(lambda d, shape=shape, ratio=ratio: _decode_image(d, shape, ratio), parsed[key],
                                 fn_output_signature=tf.TensorSpec(shape, tf.float32))
        return out

    def finish(self, parsed: dict[str, tf.Tensor]):
        features: dict[str, tf.Tensor] = {}
        img = self.image
        if self.fmt == "mnist":
            features["image"] = _raw_image(parsed[specs.MNIST_IMAGE_KEY],
                                           [img["height"], img["width"], img["channels"]], self.img_scale)
        elif self.fmt == "flowers":
            features["image"] = scale_pixels(parsed[specs.FLOWERS_IMAGE_KEY], self.img_scale)
        else:
            scale = img.get("scale", "unit")
            for name, fspec in self.features.items():
                value = parsed[name]
                kind = fspec["kind"]
                if kind == "raw_image":
                    value = _raw_image(value, fspec["image_shape"], scale)
                elif kind in ("jpeg", "png"):
                    value = scale_pixels(value, scale)
                elif value.dtype == tf.int64:
                    value = tf.cast(value, tf.int32)
                features[name] = value
        if self.label_key and self.label_key in parsed:
            labels = tf.cast(parsed[self.label_key], tf.int32) - self.offset
            if self.num_classes is not None and self.mode != "predict":
                labels = assert_label_range(labels, self.num_classes, self.offset)
        else:
            first = next(iter(parsed.values()))
            labels = tf.fill(tf.shape(first)[:1], -1)
        if self.assertions:
            features = apply_assertions(features, self.assertions, self.fmt)
        return features, labels

    def __call__(self, serialized: tf.Tensor):
        parsed = self.parse(serialized)
        if self.encoded:
            if self.image_augment is not None:
                raise ValueError("a decoder with a per-image augmenter runs through `batches()`")
            parsed = self.decode_batch(parsed)
        return self.finish(parsed)

    def batches(self, ds: tf.data.Dataset, batch_size: int, *, drop_remainder: bool,
                augment: Callable | None = None, batched: bool = False) -> tf.data.Dataset:
        """Serialized records (or, with `batched`, batches of them) -> decoded `(features, labels)` batches.

        `augment(features, labels)` runs on each decoded batch when given.
        """
        finish = self.finish if augment is None else (lambda p: augment(*self.finish(p)))
        if not batched:
            ds = ds.batch(batch_size, drop_remainder=drop_remainder)
        if self.encoded:  # JPEG/PNG: parse per batch, decode (and augment) each image in parallel
            ds = ds.map(self.parse, num_parallel_calls=tf.data.AUTOTUNE).unbatch()
            ds = ds.map(self.decode_one, num_parallel_calls=tf.data.AUTOTUNE)
            ds = ds.batch(batch_size, drop_remainder=drop_remainder)
            return ds.map(finish, num_parallel_calls=tf.data.AUTOTUNE)
        return ds.map(lambda s: finish(self.parse(s)), num_parallel_calls=tf.data.AUTOTUNE)


def make_batch_decoder(section: Mapping[str, Any], mode: str, *, num_classes: int | None = None,
                       image_augment: Callable | None = None) -> BatchDecoder:
    """The `BatchDecoder` for a resolved data section and mode (callable on a batch of records)."""
    return BatchDecoder(section, mode, num_classes=num_classes, image_augment=image_augment)


def _raw_image(raw: tf.Tensor, shape: list[int], scale: str) -> tf.Tensor:
    pixels = tf.io.decode_raw(raw, tf.uint8)
    images = tf.reshape(pixels, [-1] + list(shape))
    return scale_pixels(tf.cast(images, tf.float32) * (1.0 / 255.0), scale)


def _decode_pixels(data: tf.Tensor, channels: int, ratio: int) -> tf.Tensor:
    """One JPEG/PNG string -> uint8 [H, W, channels] at its own size (1/ratio for JPEGs)."""
    if ratio and ratio > 1:  # JPEGs decode at 1/ratio size (much faster for large photos)
        return tf.cond(tf.io.is_jpeg(data),
                       lambda: tf.io.decode_jpeg(data, channels=channels, ratio=ratio),
                       lambda: tf.io.decode_png(data, channels=channels))
    return tf.io.decode_image(data, channels=channels, expand_animations=False)


def _decode_image(data: tf.Tensor, shape: list[int], ratio: int) -> tf.Tensor:
    """One JPEG/PNG string -> float32 [h, w, c] in [0, 1], resized (bilinear) to `shape`."""
    height, width, channels = shape
    pixels = _decode_pixels(data, channels, ratio)
    img = tf.image.resize(pixels, [height, width], method="bilinear") * (1.0 / 255.0)  # uint8s: faster
    return tf.ensure_shape(img, [height, width, channels])


def parse_serialized(data_section: Mapping[str, Any], serialized: tf.Tensor) -> dict[str, tf.Tensor]:
    """Eval-mode features of a batch of serialized `tf.Example`s (for a serving signature)."""
    section = specs.resolve_section(data_section)
    features, _ = make_batch_decoder(section, "predict")(tf.convert_to_tensor(serialized))
    return features
