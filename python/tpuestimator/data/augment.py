"""Train-time augmentation (the random crop, flip, brightness and contrast of TPUEstimator's flowers example).

JPEG/PNG images (flowers format) are augmented one by one right after decoding, where the
image is still in cache (`make_image_augmenter`); raw-pixel images (mnist format) are
augmented per batch, vectorised (`make_augmenter`). Both draw fresh randomness per image.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import tensorflow as tf


def scale_pixels(unit_images: tf.Tensor, scale: str) -> tf.Tensor:
    """[0, 1] pixels -> data.image.scale ("unit": unchanged, "symmetric": [-1, 1] as in TPUEstimator's flowers example)."""
    if scale == "symmetric":
        return (unit_images - 0.5) * 2.0
    return unit_images


def augmentation_active(section: Mapping[str, Any]) -> bool:
    """Whether train mode augments: an image format with any `data.augment` switch on."""
    aug = section.get("augment") or {}
    return section["format"] in ("mnist", "flowers") and any(bool(v) for v in aug.values())


def make_augmenter(section: Mapping[str, Any]) -> Callable | None:
    """Train-time augmentation of a batch of raw-pixel images (mnist format): flip, brightness, contrast.

    Random per image, vectorised over the batch. Returns None for JPEG/PNG formats (see
    `make_image_augmenter`) or when nothing is switched on.
    """
    aug = section.get("augment") or {}
    if not augmentation_active(section) or section["format"] == "flowers":
        return None
    flip = bool(aug.get("flip_left_right"))
    brightness = float(aug.get("brightness") or 0.0)
    contrast = aug.get("contrast")
    scale = section["image"]["scale"]

    def augment(features, labels):
        x = features["image"]
        b = tf.shape(x)[0]
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
        out = dict(features)
        out["image"] = scale_pixels(x, scale)  # the decoder left the images in [0, 1] for augmentation
        return out, labels

    return augment


def make_image_augmenter(section: Mapping[str, Any]) -> Callable | None:
    """Seed 000's train-time augmentation for one decoded JPEG/PNG image (flowers format).

    `augment_image(image [H, W, c] of any size, max_value) -> float32 [h, w, c]` (scaled per
    data.image.scale): a random (h, w) crop of the image resized to (h+10, w+10) (as the flowers example;
    one `crop_and_resize` measured 2x slower), a random left-right flip, random brightness
    and contrast, then clipping to [0, 1]. Per image, so the work stays in cache (a batched
    version measured 2x slower); returns None when nothing is on or the format is not flowers.
    """
    aug = section.get("augment") or {}
    if not augmentation_active(section) or section["format"] != "flowers":
        return None
    image = section["image"]
    height, width, channels = image["height"], image["width"], image["channels"]
    crop = bool(aug.get("random_crop"))
    flip = bool(aug.get("flip_left_right"))
    brightness = float(aug.get("brightness") or 0.0)
    contrast = aug.get("contrast")
    scale = image["scale"]

    # the flowers example: resize to (h + 10, w + 10), then a random (h, w) crop
    size = [height + 10, width + 10] if crop else [height, width]

    def augment_image(img: tf.Tensor, max_value: float = 255.0) -> tf.Tensor:
        if img.shape[0] != size[0] or img.shape[1] != size[1]:
            x = tf.image.resize(img, size, method="bilinear")  # on the uint8s: 2x faster on large photos
        else:
            x = tf.cast(img, tf.float32)
        x = x * (1.0 / max_value)
        if crop:
            x = tf.image.random_crop(x, [height, width, channels])
        if flip:
            x = tf.image.random_flip_left_right(x)
        if brightness:
            x = x + tf.random.uniform([], -brightness, brightness)
        if contrast:
            x = tf.image.random_contrast(x, float(contrast[0]), float(contrast[1]))
        if brightness or contrast:
            x = tf.clip_by_value(x, 0.0, 1.0)
        return tf.ensure_shape(scale_pixels(x, scale), [height, width, channels])

    return augment_image
