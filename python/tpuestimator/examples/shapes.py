"""The `shapes` example: synthetic JPEG images of circles, squares and triangles.

Deterministic (seeded) small images with random colours, positions, sizes and pixel noise,
written in the format of TPUEstimator's flowers example (`image/encoded` JPEG, `image/class/label` from 1,
`image/class/text`), with labels.txt, manifest.json and shapes.yaml for `image_classifier`.
"""
from __future__ import annotations

import io
import os
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # Pillow is imported where it is used
    from PIL import Image

CLASSES = ("circle", "square", "triangle")
SIZE = 32

CONFIG = """\
# The generated shapes example: {n_train} train / {n_eval} eval synthetic 32x32 JPEGs of
# circles, squares and triangles in the TFRecord format of TPUEstimator's flowers example.
name: shapes
model: image_classifier
params:
  learning_rate: 0.003
  num_classes: 3
  batch_norm: false   # with 360 images, batch-norm statistics make eval accuracy jumpy
data:
  format: flowers
  train: train.tfrecord
  eval: eval.tfrecord
  image: {{height: 32, width: 32, channels: 3, scale: symmetric}}
  vocabulary: labels.txt
  augment: {{flip_left_right: true}}
train:
  batch_size: 32
  max_steps: 300
  iterations_per_loop: 50
  save_checkpoints_steps: 100
eval:
  batch_size: 32
  every_n_steps: 100
export:
  exporters: [final, best]
  best_metric: accuracy
  best_mode: max
"""


def draw_shape(kind: str, rng: np.random.Generator, size: int = SIZE) -> Image.Image:
    """One RGB image of `kind` on a random background, with pixel noise."""
    from PIL import Image, ImageDraw

    bg = rng.integers(0, 80, 3)  # a dark background and a bright shape: colour varies, contrast does not
    fg = rng.integers(150, 256, 3)
    img = Image.new("RGB", (size, size), tuple(int(v) for v in bg))
    draw = ImageDraw.Draw(img)
    r = int(rng.integers(size // 4, size // 3 + 1))
    cx, cy = (int(v) for v in size // 2 + rng.integers(-(size // 8), size // 8 + 1, 2))
    colour = tuple(int(v) for v in fg)
    if kind == "circle":
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=colour)
    elif kind == "square":
        draw.rectangle([cx - r, cy - r, cx + r, cy + r], fill=colour)
    else:
        draw.polygon([(cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)], fill=colour)
    pixels = np.asarray(img, dtype=np.int16) + rng.normal(0, 10, (size, size, 3)).astype(np.int16)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def jpeg_bytes(img, quality: int = 90) -> bytes:
    out = io.BytesIO()
    img.save(out, "JPEG", quality=quality)
    return out.getvalue()


def generate(out_dir: str, *, n_train: int = 360, n_eval: int = 120, seed: int = 0) -> str:
    """Writes the shapes dataset and its config into `out_dir`; returns the config's path.

    Classes are balanced (round robin); the same seed always gives the same bytes.
    """
    from tpuestimator.data import encode
    from tpuestimator.data.manifest import build_manifest, split_info
    from tpuestimator.data.writers import write_shard
    from tpuestimator.system.io import atomic_write_json, atomic_write_text

    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(seed)
    splits = {}
    for split, n in (("train", n_train), ("eval", n_eval)):
        records, labels = [], []
        for i in range(n):
            k = i % len(CLASSES)
            records.append(encode.flowers_example(jpeg_bytes(draw_shape(CLASSES[k], rng)), k + 1, CLASSES[k]))
            labels.append(k + 1)
        name = f"{split}.tfrecord"
        write_shard(os.path.join(out_dir, name), records)
        splits[split] = split_info([name], labels, CLASSES, name, label_offset=1)
    atomic_write_text(os.path.join(out_dir, "labels.txt"), "\n".join(CLASSES) + "\n")
    manifest = build_manifest(format="flowers", splits=splits, vocabulary=CLASSES,
                              image={"height": SIZE, "width": SIZE, "channels": 3},
                              source=f"tpuestimator.examples.shapes.generate(seed={seed})")
    atomic_write_json(os.path.join(out_dir, "manifest.json"), manifest)
    config = os.path.join(out_dir, "shapes.yaml")
    atomic_write_text(config, CONFIG.format(n_train=n_train, n_eval=n_eval))
    return config
