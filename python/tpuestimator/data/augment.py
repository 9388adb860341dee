"""Train-time augmentation (the random crop, flip, brightness and contrast of TPUEstimator's flowers example).

JPEG/PNG images (flowers format) are augmented one by one right after decoding, where the
image is still in cache (`make_image_augmenter`); raw-pixel images (mnist format) are
augmented per batch, vectorised (`make_augmenter`). Both draw fresh randomness per image
from STATELESS random ops keyed by a seed the pipeline derives from `run.seed` and the
position of the batch (or image) in the training stream: the same example position gets the
same augmentation in every run, however the parallel map is scheduled and whether the run
was resumed from a checkpoint (which skips the batches before it without augmenting them).
"""
from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from tpuestimator.data.spec import DataSpec


def scale_pixels(unit_images: tf.Tensor, scale: str) -> tf.Tensor:
    """[0, 1] pixels -> data.image.scale ("unit": unchanged, "symmetric": [-1, 1] as in TPUEstimator's flowers example)."""
    if scale == "symmetric":
        return (unit_images - 0.5) * 2.0
    return unit_images


# Keeps the augmentation's random streams apart from the window shuffle's (data.epochs),
# which is keyed by the same run seed.
_AUGMENT_STREAM = 0x5EED


def position_seed(seed: int, index: tf.Tensor) -> tf.Tensor:
    """The stateless seed (int64 [2]) of the batch or image at `index` in the training stream."""
    base = tf.constant([int(seed), _AUGMENT_STREAM], tf.int64)
    return tf.random.experimental.stateless_fold_in(base, tf.cast(index, tf.int64), alg="philox")


def augmentation_active(spec: DataSpec) -> bool:
    """Whether train mode augments: an image format with any `data.augment` switch on."""
    return spec.format in ("mnist", "flowers") and spec.augment.active


def make_augmenter(spec: DataSpec) -> Callable | None:
    """Train-time augmentation of a batch of raw-pixel images (mnist format): flip, brightness, contrast.

    `augment(features, labels, seed)`: `seed` is an int64 [2] tensor (stateless randomness,
    module docstring). Random per image, vectorised over the batch. Returns None for JPEG/PNG
    formats (see `make_image_augmenter`) or when nothing is switched on.
    """
    aug = spec.augment
    if not augmentation_active(spec) or spec.format == "flowers":
        return None
    flip = bool(aug.flip_left_right)
    brightness = float(aug.brightness or 0.0)
    contrast = aug.contrast
    scale = spec.image.scale

    def augment(features, labels, seed):
        x = features["image"]
        b = tf.shape(x)[0]
        seeds = tf.random.experimental.stateless_split(seed, 3)  # one independent stream per transform
        if flip:
            x = tf.image.stateless_random_flip_left_right(x, seeds[0])
        if brightness:
            x = x + tf.random.stateless_uniform([b, 1, 1, 1], seeds[1], -brightness, brightness)
        if contrast:
            factor = tf.random.stateless_uniform([b, 1, 1, 1], seeds[2], float(contrast[0]), float(contrast[1]))
            mean = tf.reduce_mean(x, axis=[1, 2], keepdims=True)
            x = (x - mean) * factor + mean
        if brightness or contrast:
            x = tf.clip_by_value(x, 0.0, 1.0)
        out = dict(features)
        out["image"] = scale_pixels(x, scale)  # the decoder left the images in [0, 1] for augmentation
        return out, labels

    return augment


def make_image_augmenter(spec: DataSpec) -> Callable | None:
    """TPUEstimator's flowers example's train-time augmentation for one decoded JPEG/PNG image (flowers format).

    `augment_image(image [H, W, c] of any size, max_value, seed) -> float32 [h, w, c]` (scaled per
    data.image.scale): a random (h, w) crop of the image resized to (h+10, w+10) (as the flowers example;
    one `crop_and_resize` measured 2x slower), a random left-right flip, random brightness
    and contrast, then clipping to [0, 1]. Per image, so the work stays in cache (a batched
    version measured 2x slower); returns None when nothing is on or the format is not flowers.
    `seed` is an int64 [2] tensor (stateless randomness, module docstring).
    """
    aug = spec.augment
    if not augmentation_active(spec) or spec.format != "flowers":
        return None
    image = spec.image
    height, width, channels = image.height, image.width, image.channels
    crop = bool(aug.random_crop)
    flip = bool(aug.flip_left_right)
    brightness = float(aug.brightness or 0.0)
    contrast = aug.contrast
    scale = image.scale

    # the flowers example: resize to (h + 10, w + 10), then a random (h, w) crop
    size = [height + 10, width + 10] if crop else [height, width]

    def augment_image(img: tf.Tensor, max_value: float, seed: tf.Tensor) -> tf.Tensor:
        if img.shape[0] != size[0] or img.shape[1] != size[1]:
            x = tf.image.resize(img, size, method="bilinear")  # on the uint8s: 2x faster on large photos
        else:
            x = tf.cast(img, tf.float32)
        x = x * (1.0 / max_value)
        seeds = tf.random.experimental.stateless_split(seed, 4)  # one independent stream per transform
        if crop:
            x = tf.image.stateless_random_crop(x, [height, width, channels], seeds[0])
        if flip:
            x = tf.image.stateless_random_flip_left_right(x, seeds[1])
        if brightness:
            x = x + tf.random.stateless_uniform([], seeds[2], -brightness, brightness)
        if contrast:
            x = tf.image.stateless_random_contrast(x, float(contrast[0]), float(contrast[1]), seeds[3])
        if brightness or contrast:
            x = tf.clip_by_value(x, 0.0, 1.0)
        return tf.ensure_shape(scale_pixels(x, scale), [height, width, channels])

    return augment_image
