"""Bundled examples: `digits` (shipped UCI optdigits records), `shapes` (generated JPEGs) and
`fashion_mnist` (Fashion-MNIST's IDX files from Debian's dataset-fashion-mnist package or a folder).

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
    "fashion_mnist": "Fashion-MNIST (Zalando Research): 70,000 28x28 grey images of clothing, 10 classes "
                     "(60,000 train / the 10,000 test images as eval) from its IDX files (Debian package "
                     "dataset-fashion-mnist, or --from DIR) in the MNIST TFRecord format; model cnn.",
}
DIGITS_FILES = ("digits.yaml", "train.tfrecord", "eval.tfrecord", "labels.txt", "manifest.json")


def list_examples() -> dict[str, str]:
    """Example name -> one-line description."""
    return dict(_EXAMPLES)


def write_example(name: str, out_dir: str | os.PathLike, *, source_dir: str | os.PathLike | None = None,
                  limit: int | None = None) -> str:
    """Writes example `name` (config + data) into `out_dir`; returns the config file's path.

    `source_dir` and `limit` are fashion_mnist's: the folder of its four IDX files (default
    Debian's /usr/share/datasets/fashion-mnist) and the number of training images to keep
    (see `tpuestimator.examples.fashion_mnist.write`).

    Raises:
      ConfigError: for an unknown example name, or `source_dir` / `limit` given to another one.
      DataError: fashion_mnist's files missing or unreadable (naming the Debian package).
    """
    out_dir = os.fspath(out_dir)
    if name == "fashion_mnist":
        from tpuestimator.examples.fashion_mnist import write

        return write(out_dir, source_dir, limit)
    if source_dir is not None or limit is not None:
        field = "source_dir (--from)" if source_dir is not None else "limit (--limit)"
        raise ConfigError(field, source_dir if source_dir is not None else limit,
                          "nothing for the " + repr(name) + " example: only fashion_mnist reads a folder of files")
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
