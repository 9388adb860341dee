"""Writing TFRecords: image folders, numpy arrays / .npz, CSV files and pandas data frames.

`write_tfrecords(source, out_dir, ...)` plans the write (items per split, label ids,
vocabulary, feature spec), encodes every item with `encode.RecordEncoder` (the same function
the Beam writer runs), writes N shards per split atomically and then `manifest.json`.

- image folder (one subfolder per class, JPEG and PNG) -> the format of TPUEstimator's flowers example;
  split by ratio, or by `train/` and `eval/` subfolders.
- uint8 image array [n, h, w] or [n, h, w, c] + labels -> the MNIST TFRecord format.
- other arrays, dicts of arrays, .npz, CSV, data frames -> typed features (format features).

Labels are integer ids from 0 (stored from 1 for flowers records); class names live in the
vocabulary. Apache Beam is not imported here (see `tpuestimator.data.beam`).
"""
from __future__ import annotations

import collections
import dataclasses
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from tpuestimator.data import encode
from tpuestimator.data import idx as idx_files
from tpuestimator.data import spec as specs
from tpuestimator.data.manifest import build_manifest, split_info
from tpuestimator.data.sources import columns_from_source, image_folder_items, label_ids
from tpuestimator.errors import DataError

log = logging.getLogger(__name__)


@dataclasses.dataclass
class WritePlan:
    """Everything a writer needs: items per split, the encoder and the manifest fields."""

    format: str
    encoder: encode.RecordEncoder
    items: dict[str, list]
    labels: dict[str, list[int]]  # stored label per item (from 1 for flowers)
    vocabulary: list[str] | None
    image: dict | None = None
    features: dict | None = None
    label: str | None = None
    label_offset: int = 0
    source: str = ""


def write_shard(path: str, records: Iterable[bytes]) -> int:
    """Writes serialized records to `path` atomically (temp file + rename); returns the count."""
    import tensorflow as tf

    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    n = 0
    try:
        with tf.io.TFRecordWriter(tmp) as writer:
            for rec in records:
                writer.write(rec)
                n += 1
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return n


def split_indices(n: int, eval_fraction: float, seed: int, labels: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic train/eval index split; stratified by class when `labels` are given.

    Each split's order is shuffled (seeded) so class-sorted inputs do not reach the
    shuffle buffer in long runs of one class.
    """
    rng = np.random.default_rng(seed)
    if not 0.0 <= eval_fraction < 1.0:
        raise DataError(f"split={eval_fraction!r}: the eval fraction must be in [0, 1), e.g. 0.2, or 'folder' "
                        "for train/ and eval/ subfolders.")
    groups = [np.arange(n)] if labels is None else [np.flatnonzero(np.asarray(labels) == c) for c in sorted(set(labels))]
    train, ev = [], []
    for idx in groups:
        idx = rng.permutation(idx)
        k = int(round(eval_fraction * len(idx)))
        ev.append(idx[:k])
        train.append(idx[k:])
    train_idx = rng.permutation(np.concatenate(train)) if train else np.zeros(0, int)
    eval_idx = rng.permutation(np.concatenate(ev)) if ev else np.zeros(0, int)
    return train_idx.astype(int), eval_idx.astype(int)


def plan_write(source: Any, *, labels: Sequence | None = None, split: float | str | None = None, seed: int = 0,
               label: str | None = None, vocabulary: Sequence[str] | None = None,
               features: Mapping[str, Mapping[str, Any]] | None = None, image_size: Sequence[int] | None = None,
               format: str | None = None, feature_name: str = "x") -> WritePlan:
    """Plans a write: reads the source's index (not the image bytes), assigns ids and splits.

    See `write_tfrecords` for the arguments.
    """
    resize = tuple(int(v) for v in image_size) if image_size else None
    if isinstance(source, (str, os.PathLike)) and os.path.isdir(os.fspath(source)):
        return _plan_images(os.fspath(source), split, seed, vocabulary, resize)
    if idx_files.is_idx_path(source):
        return _plan_idx(os.fspath(source), labels, split, seed, label, vocabulary, format)
    cols, label_col, name = columns_from_source(source, labels=labels, label=label, features=features,
                                                feature_name=feature_name)
    ids, vocab = (label_ids(cols.pop(label_col), vocabulary, where=f"{name}: label column {label_col!r}")
                  if label_col else (None, None))
    n = len(next(iter(cols.values()))) if cols else len(ids)
    eval_fraction = 0.2 if split is None else split
    if isinstance(eval_fraction, str):
        raise DataError(f"split={split!r}: only image folders split by folder; give an eval fraction such as 0.2.")
    train_idx, eval_idx = split_indices(n, float(eval_fraction), seed, ids)
    image_cols = [k for k, v in cols.items() if v.dtype == np.uint8 and v.ndim in (3, 4)]
    if format == "mnist" or (format is None and len(cols) == 1 and image_cols and ids is not None):
        pixels = _pixels(cols, name)
        shape = list(pixels.shape[1:]) + ([1] if pixels.ndim == 3 else [])
        items = {s: [(pixels[i], int(ids[i])) for i in idx] for s, idx in (("train", train_idx), ("eval", eval_idx))}
        return WritePlan("mnist", encode.RecordEncoder("mnist"), items,
                         {s: [int(ids[i]) for i in idx] for s, idx in (("train", train_idx), ("eval", eval_idx))},
                         vocab, image={"height": shape[0], "width": shape[1], "channels": shape[2]},
                         label=specs.MNIST_LABEL_KEY, source=name)
    fspec = {k: {"dtype": _dtype_name(v), "shape": list(v.shape[1:])} for k, v in cols.items()}
    lab = label_col or None
    if lab and lab in fspec:
        raise DataError(f"{name}: label {lab!r} is also a feature column; rename one of them.")
    items = {}
    stored = {}
    for s, idx in (("train", train_idx), ("eval", eval_idx)):
        rows = []
        for i in idx:
            row = {k: v[i] for k, v in cols.items()}
            if lab:
                row[lab] = [int(ids[i])]
            rows.append(row)
        items[s] = rows
        stored[s] = [int(ids[i]) for i in idx] if ids is not None else []
    encoder = encode.RecordEncoder("features", features=fspec, label=lab)
    return WritePlan("features", encoder, items, stored, vocab, features=fspec, label=lab, source=name)


def _plan_idx(images_path: str, labels_path, split, seed: int, label: str | None, vocabulary,
              format: str | None) -> WritePlan:
    """An MNIST-format pair of IDX files (images, labels) -> the MNIST TFRecord format."""
    if labels_path is not None and not isinstance(labels_path, (str, os.PathLike)):
        raise DataError(f"{images_path}: an IDX images file takes its labels from an IDX labels file; give its "
                        "path (labels='train-labels-idx1-ubyte.gz', --labels FILE), not label values.",
                        path=images_path)
    if format not in (None, "mnist"):
        raise DataError(f"{images_path}: IDX files are written in the MNIST TFRecord format; drop format={format!r}.",
                        path=images_path)
    if label not in (None, specs.MNIST_LABEL_KEY):
        raise DataError(f"{images_path}: IDX records store the label as {specs.MNIST_LABEL_KEY!r}; drop "
                        f"label={label!r}.", path=images_path)
    images, ids = idx_files.read_pair(images_path, labels_path)
    plan = plan_write({"image": images}, labels=ids.astype(np.int64), split=split, seed=seed,
                      vocabulary=vocabulary, format="mnist")
    plan.source = os.path.abspath(images_path)
    return plan


def _pixels(cols: Mapping[str, np.ndarray], name: str) -> np.ndarray:
    """The one image column of an mnist-format write, as uint8 [n, h, w(, c)].

    Integer (or integral float) arrays with values in 0..255 are accepted (R's integer
    arrays arrive as int32).
    """
    if len(cols) != 1 or next(iter(cols.values())).ndim not in (3, 4):
        shapes = {k: list(v.shape) for k, v in cols.items()}
        raise DataError(f"{name}: format 'mnist' needs exactly one image array [n, height, width(, channels)] of "
                        f"pixels 0..255 plus labels; got {shapes}.")
    key, arr = next(iter(cols.items()))
    if arr.dtype == np.uint8:
        return arr
    values = np.asarray(arr)
    if values.dtype.kind not in "iuf" or (values.dtype.kind == "f" and not np.all(np.mod(values, 1) == 0)):
        raise DataError(f"{name}: column {key!r} holds {values.dtype} values; mnist records store whole pixel "
                        "values 0..255. Round or rescale the images (e.g. x * 255).", feature=key)
    lo, hi = values.min(), values.max()
    if lo < 0 or hi > 255:
        raise DataError(f"{name}: column {key!r} holds pixels from {lo} to {hi}; mnist records store 0..255. "
                        "Rescale the images.", feature=key)
    return values.astype(np.uint8)


def _dtype_name(arr: np.ndarray) -> str:
    if arr.dtype.kind == "f":
        return "float32"
    if arr.dtype.kind in "iub":
        return "int64"
    return "string"


def _plan_images(folder: str, split, seed: int, vocabulary, resize) -> WritePlan:
    by_folder = split == "folder" or (split is None and all(
        os.path.isdir(os.path.join(folder, s)) for s in ("train", "eval")))
    if by_folder:
        per_split = {s: image_folder_items(os.path.join(folder, s)) for s in ("train", "eval")}
        classes = sorted({c for items in per_split.values() for _, c in items})
    else:
        all_items = image_folder_items(folder)
        classes = sorted({c for _, c in all_items})
    if vocabulary is not None:
        missing = sorted(set(classes) - set(vocabulary))
        if missing:
            raise DataError(f"{folder}: class folder(s) {missing} are not in the vocabulary {list(vocabulary)}; "
                            "add them to the vocabulary or remove the folders.", path=folder)
        classes = list(vocabulary)
    index = {c: i for i, c in enumerate(classes)}
    if not by_folder:
        ids = [index[c] for _, c in all_items]
        train_idx, eval_idx = split_indices(len(all_items), 0.2 if split is None else float(split), seed, ids)
        per_split = {"train": [all_items[i] for i in train_idx], "eval": [all_items[i] for i in eval_idx]}
    else:
        rng = np.random.default_rng(seed)
        per_split = {s: [items[i] for i in rng.permutation(len(items))] for s, items in per_split.items()}
    sizes = collections.Counter()
    for items in per_split.values():
        for path, _ in items:
            sizes[_probe_size(path)] += 1
    if resize:
        image = {"height": resize[0], "width": resize[1], "channels": 3}
    else:
        (h, w), _ = sizes.most_common(1)[0]
        image = {"height": h, "width": w, "channels": 3}
        if len(sizes) > 1:
            log.info("images come in %d sizes; the manifest proposes the most common, %dx%d (the pipeline resizes)",
                     len(sizes), h, w)
    items = {s: [(p, index[c] + 1, c) for p, c in v] for s, v in per_split.items()}
    stored = {s: [lab for _, lab, _ in v] for s, v in items.items()}
    return WritePlan("flowers", encode.RecordEncoder("flowers", resize=resize), items, stored, classes,
                     image=image, label=specs.FLOWERS_LABEL_KEY, label_offset=1, source=os.path.abspath(folder))


def _probe_size(path: str) -> tuple[int, int]:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            if img.format not in ("JPEG", "PNG"):
                raise DataError(f"{path}: the image is {img.format}, not JPEG or PNG. Convert or remove it.", path=path)
            return img.height, img.width
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise DataError(f"{path}: cannot read the image ({exc}). Replace or remove the file; only JPEG and PNG "
                        "images are accepted.", path=path) from None


def write_tfrecords(source: Any, out_dir: str | os.PathLike, *, labels: Sequence | None = None,
                    split: float | str | None = None, shards: int = 1, seed: int = 0, label: str | None = None,
                    vocabulary: Sequence[str] | None = None, features: Mapping[str, Mapping[str, Any]] | None = None,
                    image_size: Sequence[int] | None = None, format: str | None = None, feature_name: str = "x",
                    overwrite: bool = False, beam: bool = False, runner: str = "DirectRunner",
                    pipeline_options: Sequence[str] = ()) -> dict:
    """Writes `source` as TFRecord shards plus a manifest.json in `out_dir`.

    Args:
      source: an image folder path (one subfolder per class), a `.npz` or `.csv` path, a
        pandas data frame, a dict of arrays, or a numpy array (with `labels`).
      out_dir: the output folder (created; must not already hold a manifest unless `overwrite`).
      labels: labels for an array source (ints, or strings mapped through `vocabulary`).
      split: eval fraction (default 0.2; 0 writes train only), or "folder" for `train/` and
        `eval/` subfolders (the default when an image folder has both).
      shards: files per split. seed: seeds the split and the record order.
      label: the label column of a data frame / CSV / npz / dict (default "label" if present).
      vocabulary: class names by id (string labels are mapped through it; default sorted).
      features: declared dtypes (and shapes) per column, e.g. {"x": {"dtype": "float32"}};
        values that do not convert raise DataError.
      image_size: (height, width) to resize folder images to (re-encoded as JPEG).
      format: "mnist" to force the MNIST TFRecord format for a uint8 image array.
      beam: run the conversion as an Apache Beam pipeline (`runner`, `pipeline_options`).

    Returns:
      The manifest dict, with "path" set to the manifest file.

    Raises:
      DataError: naming the file / column, the value and the fix.
    """
    out_dir, shards = check_output(out_dir, shards, overwrite=overwrite)
    plan = plan_write(source, labels=labels, split=split, seed=seed, label=label, vocabulary=vocabulary,
                      features=features, image_size=image_size, format=format, feature_name=feature_name)

    def write_files(tmp: str) -> dict:
        if beam:
            from tpuestimator.data.beam import run_plan

            files = run_plan(plan, tmp, shards=shards, runner=runner, pipeline_options=pipeline_options)
        else:
            files = _run_local(plan, tmp, shards)
        return _manifest(plan, files, shards)

    manifest = write_staged(out_dir, write_files)
    log.info("wrote %s", ", ".join(f"{s}: {v['count']} records" for s, v in manifest["splits"].items()))
    return manifest


def _run_local(plan: WritePlan, out: str, shards: int) -> dict[str, list[str]]:
    files = {}
    for split, items in plan.items.items():
        if not items:
            continue
        names = [encode.shard_name(split, i, shards) for i in range(shards)]
        for i, name in enumerate(names):
            write_shard(os.path.join(out, name), (plan.encoder(item) for item in items[i::shards]))
        files[split] = names
    return files


def _manifest(plan: WritePlan, files: Mapping[str, list[str]], shards: int) -> dict:
    splits = {s: split_info(sorted(files[s]), plan.labels[s], plan.vocabulary, encode.shard_pattern(s, shards),
                            label_offset=plan.label_offset) for s in files}
    for s in files:
        splits[s]["count"] = len(plan.items[s])
    return build_manifest(format=plan.format, splits=splits, vocabulary=plan.vocabulary, image=plan.image,
                          features=plan.features, label=plan.label, label_offset=plan.label_offset,
                          source=plan.source)



def check_output(out_dir: str | os.PathLike, shards: int, *, overwrite: bool) -> tuple[str, int]:
    """(absolute out_dir, shards) of a writer, checked before anything is read or written: at
    least one shard, and no manifest already there unless `overwrite`."""
    if int(shards) < 1:
        raise DataError(f"shards={shards!r}: write at least 1 shard per split.")
    out_dir = os.path.abspath(os.fspath(out_dir))
    if os.path.exists(os.path.join(out_dir, specs.MANIFEST_NAME)) and not overwrite:
        raise DataError(f"{out_dir} already holds a {specs.MANIFEST_NAME}; choose a new folder or pass "
                        "overwrite=True (--overwrite) to replace its records.", path=out_dir)
    return out_dir, int(shards)


def write_staged(out_dir: str, write_files) -> dict:
    """Runs `write_files(tmp) -> manifest` in a hidden folder beside `out_dir`, writes the
    manifest there and moves everything into `out_dir`, the manifest last (`publish_folder`):
    a writer that fails leaves `out_dir` as it was. Returns the manifest with its "path"."""
    from tpuestimator.system.io import atomic_write_json

    manifest_path = os.path.join(out_dir, specs.MANIFEST_NAME)
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out_dir)}.", suffix=".tmp", dir=parent)
    try:
        manifest = write_files(tmp)
        atomic_write_json(os.path.join(tmp, specs.MANIFEST_NAME), manifest)
        os.chmod(os.path.join(tmp, specs.MANIFEST_NAME), 0o644)
        publish_folder(tmp, out_dir, manifest_path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    manifest["path"] = manifest_path
    return manifest

def publish_folder(tmp: str, out_dir: str, manifest_path: str) -> None:
    """Moves the finished shards into `out_dir`, the manifest last."""
    import json

    if not os.path.exists(out_dir):
        os.chmod(tmp, 0o755)
        os.replace(tmp, out_dir)  # whole folder at once
        os.makedirs(tmp, exist_ok=True)  # so the caller's cleanup finds something to remove
        return
    if os.path.exists(manifest_path):  # overwrite: drop the old shards first
        with open(manifest_path) as fh:
            old = json.load(fh)
        os.unlink(manifest_path)
        for info in old.get("splits", {}).values():
            for name in info.get("files", []):
                path = os.path.join(out_dir, name)
                if os.path.exists(path):
                    os.unlink(path)
    names = sorted(os.listdir(tmp))
    for name in names:
        if name != specs.MANIFEST_NAME:
            os.replace(os.path.join(tmp, name), os.path.join(out_dir, name))
    os.replace(os.path.join(tmp, specs.MANIFEST_NAME), manifest_path)
