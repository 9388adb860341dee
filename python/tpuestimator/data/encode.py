"""Record encoding shared by the local writer and the Beam writer (one function, no copies).

A write is planned as a list of *items* (an image file with its label, or one row of typed
values); `RecordEncoder(item) -> bytes` turns an item into a serialized `tf.train.Example`.
The encoder is a picklable dataclass so Beam workers can run it.
"""
from __future__ import annotations

import dataclasses
import io
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from tpuestimator.data import spec as specs
from tpuestimator.errors import DataError

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")


def _feature(dtype: str, values: Any):
    import tensorflow as tf

    if dtype == "float32":
        return tf.train.Feature(float_list=tf.train.FloatList(value=np.asarray(values, np.float32).reshape(-1)))
    if dtype == "int64":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=np.asarray(values, np.int64).reshape(-1)))
    if isinstance(values, (bytes, str)):
        values = [values]
    return tf.train.Feature(bytes_list=tf.train.BytesList(
        value=[v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in values]))


def example_bytes(features: Mapping[str, tuple[str, Any]]) -> bytes:
    """Serializes {name: (dtype, values)} as a `tf.train.Example` (keys sorted: deterministic bytes)."""
    import tensorflow as tf

    feats = {name: _feature(dtype, values) for name, (dtype, values) in sorted(features.items())}
    return tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString(deterministic=True)


def mnist_example(pixels: np.ndarray, label: int) -> bytes:
    """Seed 002's record: `image_raw` (uint8 pixel bytes) + `label` (int64)."""
    raw = np.ascontiguousarray(pixels, dtype=np.uint8).tobytes()
    return example_bytes({specs.MNIST_IMAGE_KEY: ("string", raw), specs.MNIST_LABEL_KEY: ("int64", [int(label)])})


def flowers_example(encoded: bytes, label: int, text: str | None = None) -> bytes:
    """Seed 000's record: `image/encoded` (JPEG/PNG bytes), `image/class/label` (from 1), `image/class/text`."""
    feats = {specs.FLOWERS_IMAGE_KEY: ("string", encoded), specs.FLOWERS_LABEL_KEY: ("int64", [int(label)])}
    if text is not None:
        feats[specs.FLOWERS_TEXT_KEY] = ("string", text)
    return example_bytes(feats)


def read_image(path: str, *, resize: tuple[int, int] | None = None, quality: int = 95) -> tuple[bytes, tuple[int, int, int]]:
    """Reads and checks one JPEG/PNG; returns (bytes to store, (height, width, channels)).

    The original bytes are kept unless `resize` is given (then re-encoded as JPEG).

    Raises:
      DataError: naming the file when it is not a readable JPEG or PNG.
    """
    import tensorflow as tf
    from PIL import Image, UnidentifiedImageError

    with tf.io.gfile.GFile(path, "rb") as fh:
        data = fh.read()
    try:
        with Image.open(io.BytesIO(data)) as img:
            fmt = img.format
            img.load()
            if fmt not in ("JPEG", "PNG"):
                raise DataError(f"{path}: the image is {fmt}, not JPEG or PNG. Convert it (e.g. with Pillow) "
                                "or remove it from the folder.", path=path)
            if resize is None:
                channels = 1 if img.mode in ("L", "1", "I;16", "I") else 3
                return data, (img.height, img.width, channels)
            rgb = img.convert("RGB").resize((resize[1], resize[0]), Image.BILINEAR)
            out = io.BytesIO()
            rgb.save(out, "JPEG", quality=quality)
            return out.getvalue(), (resize[0], resize[1], 3)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise DataError(f"{path}: cannot read the image ({exc}). Replace or remove the file; only JPEG and PNG "
                        "images are accepted.", path=path) from None


@dataclasses.dataclass(frozen=True)
class RecordEncoder:
    """Encodes one planned item as serialized `tf.train.Example` bytes.

    format "flowers": item = (image path, label id from 1, class text).
    format "mnist": item = (uint8 pixel array, label id).
    format "features": item = {name: value} with `features` giving each name's dtype.
    """

    format: str
    features: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    label: str | None = None
    resize: tuple[int, int] | None = None

    def __call__(self, item: Any) -> bytes:
        if self.format == "flowers":
            path, label, text = item
            data, _ = read_image(path, resize=self.resize)
            return flowers_example(data, label, text)
        if self.format == "mnist":
            pixels, label = item
            return mnist_example(pixels, label)
        feats = {}
        for name, value in item.items():
            dtype = "int64" if name == self.label else self.features[name]["dtype"]
            feats[name] = (dtype, value)
        return example_bytes(feats)


def shard_name(split: str, index: int, shards: int) -> str:
    """File name of one shard, e.g. ``train-00000-of-00004.tfrecord``."""
    return f"{split}-{index:05d}-of-{shards:05d}.tfrecord"


def shard_pattern(split: str, shards: int) -> str:
    """Glob matching every shard of a split (relative to the manifest's folder)."""
    return f"{split}-*-of-{shards:05d}.tfrecord"


def is_image_file(name: str) -> bool:
    """True for names ending in .jpg/.jpeg/.png (any case)."""
    return os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS
