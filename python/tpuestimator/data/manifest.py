"""manifest.json: what a folder of TFRecord shards holds (written last, after the shards).

Fields: `version`, `format` (mnist / flowers / features), `label` (the label feature),
`label_offset` (1 for flowers records), `image` ({height, width, channels} for image data),
`features` (record feature spec for format features: name -> {dtype, shape, kind}),
`vocabulary` (class names by label id from 0), `num_classes`, and `splits`:
{split: {pattern, files, count, class_counts: {class name: n}}}.
"""
from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tpuestimator.data import spec as specs


def split_info(files: Sequence[str], labels: Iterable[int], vocabulary: Sequence[str] | None,
               pattern: str, label_offset: int = 0) -> dict[str, Any]:
    """One split's entry: its files (relative names), record count and count per class."""
    counts = collections.Counter(int(label) - label_offset for label in labels)
    if vocabulary:
        per_class = {str(vocabulary[i]) if 0 <= i < len(vocabulary) else str(i): counts.get(i, 0)
                     for i in sorted(set(range(len(vocabulary))) | set(counts))}
    else:
        per_class = {str(i): n for i, n in sorted(counts.items())}
    return {"pattern": pattern, "files": list(files), "count": int(sum(counts.values())), "class_counts": per_class}


def build_manifest(*, format: str, splits: Mapping[str, dict], vocabulary: Sequence[str] | None = None,
                   image: Mapping[str, int] | None = None, features: Mapping[str, dict] | None = None,
                   label: str | None = None, label_offset: int | None = None,
                   source: str | None = None) -> dict[str, Any]:
    """The manifest dict (see the module docstring)."""
    if label is None:
        label = {"mnist": specs.MNIST_LABEL_KEY, "flowers": specs.FLOWERS_LABEL_KEY}.get(format)
    if label_offset is None:
        label_offset = 1 if format == "flowers" else 0
    out: dict[str, Any] = {"version": specs.MANIFEST_VERSION, "format": format, "label": label,
                           "label_offset": label_offset}
    if image:
        out["image"] = dict(image)
    if features:
        out["features"] = {k: dict(v) for k, v in features.items()}
    if vocabulary is not None:
        out["vocabulary"] = [str(v) for v in vocabulary]
        out["num_classes"] = len(vocabulary)
    out["splits"] = {k: dict(v) for k, v in splits.items()}
    if source:
        out["source"] = source
    out["created_by"] = "tpuestimator.data.writers"
    return out
