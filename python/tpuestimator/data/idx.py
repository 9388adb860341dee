"""Reading MNIST's IDX files (the format of MNIST and Fashion-MNIST), gzipped or not.

An IDX file is a big-endian header, then the data: a 4-byte magic number (two zero bytes, a
type code, 0x08 for unsigned bytes, and the number of dimensions), one 4-byte size per
dimension, then the values. Images are `0x00000803` (uint8 [n, rows, cols]); labels are
`0x00000801` (uint8 [n]). Parsed with numpy alone.

Every check runs before a writer writes anything: a wrong magic number, a file shorter or
longer than its header says, or image and label files of different lengths raise one
DataError naming the file, the value and the fix.
"""
from __future__ import annotations

import gzip
import os
import re
import zlib

import numpy as np

from tpuestimator.errors import DataError

IMAGES_MAGIC = 0x00000803
LABELS_MAGIC = 0x00000801
_KINDS = {"images": (IMAGES_MAGIC, 3), "labels": (LABELS_MAGIC, 1)}
# MNIST's names (train-images-idx3-ubyte.gz) and the common .idx3 / .idx1 endings
_IDX_NAME = re.compile(r"(idx\d-ubyte|\.idx\d?)(\.gz)?$", re.IGNORECASE)


def is_idx_path(source) -> bool:
    """Whether `source` is a path named like an IDX file (e.g. train-images-idx3-ubyte.gz)."""
    return isinstance(source, (str, os.PathLike)) and bool(_IDX_NAME.search(os.path.basename(os.fspath(source))))


def _file_bytes(path: str) -> bytes:
    if not os.path.isfile(path):
        raise DataError(f"{path}: no such IDX file. Give the path of an MNIST-format file, e.g. "
                        "train-images-idx3-ubyte.gz.", path=path)
    with open(path, "rb") as fh:
        raw = fh.read()
    if raw[:2] != b"\x1f\x8b":  # not gzip: the IDX bytes themselves
        return raw
    try:
        return gzip.decompress(raw)
    except (EOFError, OSError, zlib.error) as exc:
        raise DataError(f"{path}: the gzip file is truncated or corrupt ({exc}). Download or copy the file "
                        "again.", path=path) from None


def read_idx(path: str | os.PathLike, kind: str) -> np.ndarray:
    """Reads one IDX file: `kind` "images" -> uint8 [n, rows, cols], "labels" -> uint8 [n].

    Raises:
      DataError: a wrong magic number, a header or data shorter or longer than the sizes
        the header gives, or a file that does not exist; naming the file.
    """
    path = os.fspath(path)
    magic_expected, ndim = _KINDS[kind]
    raw = _file_bytes(path)
    header_size = 4 + 4 * ndim
    if len(raw) < 4:
        raise DataError(f"{path}: {len(raw)} bytes, too short for an IDX file's magic number. The file is "
                        "truncated: download or copy it again.", path=path)
    magic = int(np.frombuffer(raw, ">u4", count=1)[0])
    if magic != magic_expected:
        other = next((k for k, (m, _) in _KINDS.items() if m == magic and k != kind), None)
        hint = (f"this is an IDX {other} file: give it as the {other}" if other else
                "the file is not an IDX file of unsigned bytes, or not an MNIST-format file")
        raise DataError(f"{path}: magic number 0x{magic:08x}, expected 0x{magic_expected:08x} for IDX {kind} "
                        f"(uint8, {ndim} dimension{'s' if ndim > 1 else ''}); {hint}.", path=path)
    if len(raw) < header_size:
        raise DataError(f"{path}: {len(raw)} bytes, shorter than the {header_size}-byte header of IDX {kind}. "
                        "The file is truncated: download or copy it again.", path=path)
    dims = tuple(int(d) for d in np.frombuffer(raw, ">u4", count=ndim, offset=4))
    expected = int(np.prod(dims, dtype=np.int64))
    have = len(raw) - header_size
    if have != expected:
        what = "truncated: download or copy it again" if have < expected else \
            "longer than its header says: it is not one IDX file, or its header is wrong"
        raise DataError(f"{path}: the header gives {kind} of shape {list(dims)} ({expected} bytes of data) but "
                        f"the file holds {have}; the file is {what}.", path=path)
    return np.frombuffer(raw, np.uint8, count=expected, offset=header_size).reshape(dims)


def labels_path_for(images_path: str | os.PathLike) -> str:
    """The labels file beside an images file by MNIST's naming (train-images-idx3-ubyte ->
    train-labels-idx1-ubyte, with the same .gz ending or the other one)."""
    images_path = os.fspath(images_path)
    folder, name = os.path.split(images_path)
    stem = re.sub(r"\.gz$", "", name, flags=re.IGNORECASE)
    guess = stem.replace("images", "labels").replace("idx3", "idx1")
    if guess != stem:
        for candidate in (guess, guess + ".gz"):
            if os.path.isfile(os.path.join(folder, candidate)):
                return os.path.join(folder, candidate)
    raise DataError(f"{images_path}: no labels file found beside it (looked for {guess}[.gz] by MNIST's naming). "
                    "Give the IDX labels file: `--labels FILE` (labels= in Python and R).", path=images_path)


def read_pair(images_path: str | os.PathLike, labels_path: str | os.PathLike | None = None,
              limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 [n, rows, cols], labels uint8 [n]) of an MNIST-format pair; the labels
    file defaults to the one named like the images file (`labels_path_for`). `limit` keeps
    the first `limit` of each.

    Raises:
      DataError: for either file (see `read_idx`), or image and label counts that differ.
    """
    images_path = os.fspath(images_path)
    labels_path = labels_path_for(images_path) if labels_path is None else os.fspath(labels_path)
    images = read_idx(images_path, "images")
    labels = read_idx(labels_path, "labels")
    if len(images) != len(labels):
        raise DataError(f"{images_path} holds {len(images)} images but {labels_path} holds {len(labels)} labels; "
                        "give the labels file of the same set (e.g. train-images with train-labels, t10k-images "
                        "with t10k-labels).", path=images_path)
    if len(images) == 0:
        raise DataError(f"{images_path}: no images to write (the header gives 0).", path=images_path)
    if limit is not None:
        images, labels = images[:limit], labels[:limit]
    return images, labels
