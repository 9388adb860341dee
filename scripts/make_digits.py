#!/usr/bin/env python
"""Regenerates the bundled `digits` example from scikit-learn's copy of UCI optdigits.

Writes python/tpuestimator/examples/digits/{train,eval}.tfrecord in the MNIST
format (`image_raw`: 64 uint8 bytes, pixels rescaled 0..16 -> 0..255; `label`: int64),
plus labels.txt, manifest.json and digits.yaml. The split is stratified and fixed
(seed 0): 1,437 train / 360 eval. Run: `PYTHONPATH=python .venv/bin/python scripts/make_digits.py`.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from tpuestimator.data import encode  # noqa: E402
from tpuestimator.data.manifest import build_manifest, split_info  # noqa: E402
from tpuestimator.data.writers import write_shard  # noqa: E402
from tpuestimator.system.io import atomic_write_json, atomic_write_text  # noqa: E402

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "tpuestimator",
                           "examples", "digits")
EVAL_SIZE = 360

CONFIG = """\
# The bundled digits example: UCI optdigits (8x8 grey images, 10 classes) in the
# MNIST TFRecord format. Regenerate the data with scripts/make_digits.py.
name: digits
model: cnn
params:
  learning_rate: 0.003
  num_classes: 10
data:
  format: mnist
  train: train.tfrecord
  eval: eval.tfrecord
  image: {height: 8, width: 8, channels: 1}
  vocabulary: labels.txt
train:
  batch_size: 64
  max_steps: 1500
  iterations_per_loop: 100
  save_checkpoints_steps: 500
eval:
  batch_size: 64
  every_n_steps: 500
export:
  exporters: [final, best]
  best_metric: accuracy
  best_mode: max
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = np.clip(np.rint(digits.images * (255.0 / 16.0)), 0, 255).astype(np.uint8)  # [n, 8, 8]
    labels = digits.target.astype(np.int64)
    idx = np.arange(len(labels))
    train_idx, eval_idx = train_test_split(idx, test_size=EVAL_SIZE, stratify=labels, random_state=args.seed)
    train_idx, eval_idx = np.sort(train_idx), np.sort(eval_idx)  # stable on-disk order; training shuffles
    os.makedirs(args.out, exist_ok=True)
    vocab = [str(i) for i in range(10)]
    splits = {}
    for split, ids in (("train", train_idx), ("eval", eval_idx)):
        records = [encode.mnist_example(images[i].reshape(8, 8, 1), int(labels[i])) for i in ids]
        name = f"{split}.tfrecord"
        write_shard(os.path.join(args.out, name), records)
        splits[split] = split_info([name], labels[ids], vocab, name)
    atomic_write_text(os.path.join(args.out, "labels.txt"), "\n".join(vocab) + "\n")
    manifest = build_manifest(format="mnist", splits=splits, vocabulary=vocab,
                              image={"height": 8, "width": 8, "channels": 1},
                              source="sklearn.datasets.load_digits (UCI optdigits), pixels 0..16 -> 0..255")
    atomic_write_json(os.path.join(args.out, "manifest.json"), manifest)
    atomic_write_text(os.path.join(args.out, "digits.yaml"), CONFIG)
    for fname in os.listdir(args.out):
        os.chmod(os.path.join(args.out, fname), 0o644)
    print(f"wrote {len(train_idx)} train / {len(eval_idx)} eval records to {os.path.abspath(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
