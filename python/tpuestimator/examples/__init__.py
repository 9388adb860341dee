"""Bundled examples: `digits` (shipped UCI optdigits records) and `shapes` (generated JPEGs).

`write_example(name, out_dir)` puts an example's config and data in a folder and returns the
config's path, ready for `tpuestimator train <config>` or `run_job(<config>)`.

Layer 2 (beside `data`, whose writers it uses): may import the contracts, `core` and `data`.
"""
from __future__ import annotations

import os
from importlib import resources

from tpuestimator.errors import ConfigError
from tpuestimator.system.io import atomic_write_bytes

_EXAMPLES = {
    "digits": "UCI optdigits: 1,797 8x8 grey digit images (1,437 train / 360 eval) in the "
              "MNIST TFRecord format; model cnn.",
    "shapes": "Synthetic 32x32 JPEGs of circles, squares and triangles in the format of TPUEstimator's flowers example; "
              "model image_classifier.",
}
DIGITS_FILES = ("digits.yaml", "train.tfrecord", "eval.tfrecord", "labels.txt", "manifest.json")


def list_examples() -> dict[str, str]:
    """Example name -> one-line description."""
    return dict(_EXAMPLES)


def write_example(name: str, out_dir: str | os.PathLike) -> str:
    """Writes example `name` (config + data) into `out_dir`; returns the config file's path.

    Raises:
      ConfigError: for an unknown example name.
    """
    out_dir = os.fspath(out_dir)
    if name == "digits":
        os.makedirs(out_dir, exist_ok=True)
        pkg = resources.files("tpuestimator.examples").joinpath("digits")
        for fname in DIGITS_FILES:
            atomic_write_bytes(os.path.join(out_dir, fname), pkg.joinpath(fname).read_bytes())
        return os.path.join(out_dir, "digits.yaml")
    if name == "shapes":
        from tpuestimator.examples.shapes import generate

        return generate(out_dir)
    raise ConfigError("example", name, "one of " + ", ".join(sorted(_EXAMPLES)))
