"""The `fashion_mnist` example: Zalando Research's Fashion-MNIST (28x28 grey images of clothing,
ten classes) from its four IDX files into the MNIST TFRecord format, with a config for the
reference `cnn` model.

The files are not bundled (30 MB): they come from Debian's `dataset-fashion-mnist` package
(`/usr/share/datasets/fashion-mnist/`) or any folder holding them. The training set's 60,000
images become train.tfrecord and the test set's 10,000 eval.tfrecord, the held-out split the
dataset's published results are measured on.
"""
from __future__ import annotations

import os

from tpuestimator.errors import DataError

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
DEBIAN_PACKAGE = "dataset-fashion-mnist"
SOURCE_URL = "https://github.com/zalandoresearch/fashion-mnist"
# the dataset's class names, by label id
CLASS_NAMES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
               "Ankle boot")
FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
         "eval": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
# The test set is a sixth of the training set's size: a limited example keeps that proportion.
EVAL_SHARE = 6

CONFIG = """\
# Fashion-MNIST (Zalando Research; 28x28 grey images of clothing, 10 classes) in the MNIST
# TFRecord format, written by `tpuestimator example fashion_mnist` from {source}.
# train: the dataset's training set ({train} images); eval: its test set ({eval} images).
name: fashion_mnist
model: cnn
params:
  learning_rate: 0.001
  num_classes: 10
data:
  format: mnist
  train: train.tfrecord
  eval: eval.tfrecord
  image: {{height: 28, width: 28, channels: 1}}
  vocabulary: labels.txt
train:
  batch_size: 128
  max_steps: 3000
  iterations_per_loop: 100
  save_checkpoints_steps: 1000
eval:
  batch_size: 256
  every_n_steps: 1000
export:
  exporters: [final, best]
  best_metric: accuracy
  best_mode: max
"""


def find_files(source_dir: str | os.PathLike | None = None) -> dict[str, tuple[str, str]]:
    """split -> (images path, labels path) in `source_dir` (default the Debian package's folder),
    each file gzipped or not.

    Raises:
      DataError: naming the folder, the missing files, the Debian package and the dataset's source.
    """
    folder = os.fspath(source_dir) if source_dir is not None else DEFAULT_DIR
    found, missing = {}, []
    for split, names in FILES.items():
        paths = []
        for name in names:
            path = next((os.path.join(folder, n) for n in (name + ".gz", name)
                         if os.path.isfile(os.path.join(folder, n))), None)
            if path is None:
                missing.append(name + "[.gz]")
            paths.append(path)
        found[split] = tuple(paths)
    if missing:
        where = "the Debian package's folder " + folder if source_dir is None else folder
        raise DataError(f"{where}: Fashion-MNIST's IDX files are missing ({', '.join(missing)}). Install "
                        f"Debian's package: `apt-get install {DEBIAN_PACKAGE}` (it puts them in {DEFAULT_DIR}), "
                        f"or download the four files from Zalando Research's repository {SOURCE_URL} and "
                        "give their folder (--from DIR; from= in R).", path=folder)
    return found


def write(out_dir: str | os.PathLike, source_dir: str | os.PathLike | None = None, limit: int | None = None) -> str:
    """Writes the example's records, labels.txt, manifest.json and fashion_mnist.yaml into
    `out_dir` (replacing an earlier copy); returns the config's path.

    `limit`: keep the first `limit` training images and the first `limit` / 6 test images (the
    dataset's proportion), for a quick run. Every file is read and checked before anything is
    written; the records appear in `out_dir` all at once, the manifest last.
    """
    from tpuestimator.data import encode
    from tpuestimator.data.idx import read_pair
    from tpuestimator.data.manifest import build_manifest, split_info
    from tpuestimator.data.writers import write_shard, write_staged
    from tpuestimator.system.io import atomic_write_text

    if limit is not None and (isinstance(limit, bool) or int(limit) != limit or limit < EVAL_SHARE):
        raise DataError(f"limit={limit!r}: give a whole number of training images, at least {EVAL_SHARE} "
                        "(or none for all 60,000).")
    files = find_files(source_dir)
    sizes = {"train": limit, "eval": None if limit is None else -(-int(limit) // EVAL_SHARE)}
    arrays = {split: read_pair(*files[split], limit=sizes[split]) for split in files}
    for split, (images, _) in arrays.items():
        if images.shape[1:] != (28, 28):
            raise DataError(f"{files[split][0]}: images of {images.shape[1]}x{images.shape[2]} pixels; "
                            "Fashion-MNIST's are 28x28. Give the folder of the dataset's own files.",
                            path=files[split][0])
    out_dir = os.path.abspath(os.fspath(out_dir))
    vocabulary = list(CLASS_NAMES)

    def write_files(tmp: str) -> dict:
        splits = {}
        for split, (images, labels) in arrays.items():
            name = f"{split}.tfrecord"
            write_shard(os.path.join(tmp, name),
                        (encode.mnist_example(image[:, :, None], int(label)) for image, label in zip(images, labels)))
            splits[split] = split_info([name], labels, vocabulary, name)
        atomic_write_text(os.path.join(tmp, "labels.txt"), "\n".join(vocabulary) + "\n")
        source = os.path.dirname(os.path.abspath(files["train"][0]))
        atomic_write_text(os.path.join(tmp, "fashion_mnist.yaml"),
                          CONFIG.format(source=source, train=len(arrays["train"][0]), eval=len(arrays["eval"][0])))
        return build_manifest(format="mnist", splits=splits, vocabulary=vocabulary,
                              image={"height": 28, "width": 28, "channels": 1},
                              source=f"Fashion-MNIST (Zalando Research) IDX files in {source}")

    write_staged(out_dir, write_files)
    return os.path.join(out_dir, "fashion_mnist.yaml")
