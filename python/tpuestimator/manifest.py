"""manifest.json, read: the one reader of the file `tpuestimator data write` and the table writer
put beside their shards (`data.manifest` writes it). The lowest layer that reads it is the config
loader (a table's early stopping, `config.apply_table_stopping`); the data layer resolves a
`data` section with it (`data.spec.resolve_section`).

`Manifest`: the file as read, a frozen record whose fields are attributes. Fields (docs:
data/manifest.py): `format`, `version`, `label`, `label_offset`, `image`, `features`,
`vocabulary`, `num_classes`, `splits` ({split: {pattern, files, count, class_counts}}), a table's
`task`, `feature_columns` and `label_stats`, `source`, `created_by`.

`load_manifest` reads a file once per process while its modification time and size stay the
same, so the config loader and the job's data resolution read it once. A local file is read
without TensorFlow (loading a config never starts it); a remote one (gs://) through
`tf.io.gfile`.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from tpuestimator.errors import DataError

MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class Manifest:
    """A parsed manifest.json (None: the file does not have the field)."""

    format: str
    version: int | None = None
    label: str | None = None
    label_offset: int | None = None
    image: Mapping[str, Any] | None = None
    features: Mapping[str, Any] | None = None
    vocabulary: tuple[str, ...] | None = None
    num_classes: int | None = None
    splits: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    task: str | None = None
    feature_columns: Mapping[str, Mapping[str, Any]] | None = None
    label_stats: Mapping[str, Any] | None = None
    source: str | None = None
    created_by: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "splits", MappingProxyType(copy.deepcopy(dict(self.splits))))

    def split(self, name: str) -> Mapping[str, Any]:
        """One split's entry ({pattern, files, count, class_counts}), {} when the manifest has none."""
        return self.splits.get(name) or {}

    @property
    def is_table(self) -> bool:
        """A table's manifest (`tables.write`): inferred `feature_columns` and a `label`."""
        return self.feature_columns is not None and bool(self.label)

    @classmethod
    def from_dict(cls, manifest: Any, *, path: str) -> Manifest:
        """The record of a parsed file at `path`.

        Raises:
          DataError: naming the file, when it is not a mapping with a `format`.
        """
        if not isinstance(manifest, Mapping) or "format" not in manifest:
            raise DataError(f"data.manifest: {path!r} has no `format` field; it is not a tpuestimator "
                            "manifest. Rewrite it with `tpuestimator data write`.", path=path)
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: copy.deepcopy(v) for k, v in manifest.items() if k in known}
        if values.get("vocabulary") is not None:
            values["vocabulary"] = tuple(str(v) for v in values["vocabulary"])
        values["splits"] = values.get("splits") or {}
        return cls(**values)


def _remote(path: str) -> bool:
    return "://" in path


def manifest_path(path: str) -> str:
    """The manifest file `data.manifest` names: the path itself, or the manifest.json in a folder."""
    if _remote(path):
        import tensorflow as tf  # gfile reads gs:// too

        return os.path.join(path, MANIFEST_NAME) if tf.io.gfile.isdir(path) else path
    return os.path.join(path, MANIFEST_NAME) if os.path.isdir(path) else path


def _stamp(path: str) -> tuple[int, int] | None:
    """(modification time in ns, size) of the file, None when there is none."""
    if _remote(path):
        import tensorflow as tf

        if not tf.io.gfile.exists(path):
            return None
        stat = tf.io.gfile.stat(path)
        return int(stat.mtime_nsec), int(stat.length)
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


# Manifests read in this process, by path: (modification time, size) when read, the parsed file.
_MANIFESTS: dict[str, tuple[tuple[int, int], Manifest]] = {}
_MANIFESTS_KEPT = 32


def load_manifest(path: str) -> Manifest:
    """Reads a manifest.json written by `tpuestimator.data.writers` (or a folder holding one);
    read once per process while its modification time and size stay the same.

    Raises:
      DataError: when the file is missing or not a manifest.
    """
    path = manifest_path(path)
    stamp = _stamp(path)
    if stamp is None:
        raise DataError(f"data.manifest: {path!r} does not exist. Point data.manifest at the "
                        f"{MANIFEST_NAME} that `tpuestimator data write` wrote beside the shards.", path=path)
    cached = _MANIFESTS.get(path)
    if cached is None or cached[0] != stamp:
        cached = _MANIFESTS[path] = (stamp, read_manifest_file(path))
        while len(_MANIFESTS) > _MANIFESTS_KEPT:
            _MANIFESTS.pop(next(iter(_MANIFESTS)))
    return cached[1]  # frozen: shared by the job's readers


def read_manifest_file(path: str) -> Manifest:
    """The manifest file at `path`, parsed and checked (`load_manifest` reads through this, once).

    Raises:
      DataError: when it is not valid JSON or not a manifest.
    """
    try:
        if _remote(path):
            import tensorflow as tf

            with tf.io.gfile.GFile(path, "r") as fh:
                manifest = json.loads(fh.read())
        else:
            with open(path, encoding="utf-8") as fh:
                manifest = json.loads(fh.read())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"data.manifest: {path!r} is not valid JSON ({exc}). Rewrite it with "
                        "`tpuestimator data write`.", path=path) from None
    return Manifest.from_dict(manifest, path=path)


def table_manifest(path: str) -> Manifest | None:
    """The manifest at `path` (a manifest.json or its folder) when it is a table's (one with the
    inferred `feature_columns` and a `label`), else None. A missing or unreadable file is not
    known to be a table (the data layer reports it when the job reads its data)."""
    try:
        manifest = load_manifest(path)
    except Exception:  # noqa: BLE001 - any unreadable manifest: not known to be a table
        return None
    return manifest if manifest.is_table else None
