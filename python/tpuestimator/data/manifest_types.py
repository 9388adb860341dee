"""`Manifest`: a folder's manifest.json as read (`data.spec.load_manifest`), a frozen record whose
fields are attributes; the writers (`data.manifest.build_manifest`, `tables.write`) write the file.

Fields (docs: data/manifest.py): `format`, `version`, `label`, `label_offset`, `image`,
`features`, `vocabulary`, `num_classes`, `splits` ({split: {pattern, files, count, class_counts}}),
a table's `task`, `feature_columns` and `label_stats`, `source`, `created_by`. No TensorFlow.
"""
from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from tpuestimator.errors import DataError


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
