"""The typed objects of the data layer: a resolved `data` section (`DataSpec`, made by
`data.spec.resolve_section`: the config's generated `data` view, its fields the schema's, with
its nested objects typed and what resolution found) and its parts (`ImageSpec`, `Augment`, `Assertion`, a table's
`models.column_spec.ColumnSpec`s), and a
record's stored feature (`RecordFeature`). Frozen, keyword-only: a field is an attribute.

No TensorFlow.
"""
from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

from tpuestimator.config import DEFAULTS, section_type
from tpuestimator.models.column_spec import ColumnSpec, columns_as_dicts

# The data section's defaults: the schema's (`tpuestimator.config.DEFAULTS`).
_SCHEMA_DEFAULTS: dict[str, Any] = DEFAULTS["data"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ImageSpec:
    """`data.image`, filled: the size the model receives, channels, pixel scale, JPEG decode ratio."""

    height: int | None = None
    width: int | None = None
    channels: int = 3
    scale: str = "unit"
    decode_ratio: int = 1

    @property
    def shape(self) -> list[int]:
        """[height, width, channels]."""
        return [self.height, self.width, self.channels]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Augment:
    """`data.augment`: train-time image augmentation switches (all off by default)."""

    random_crop: bool = False
    flip_left_right: bool = False
    brightness: float | None = None
    contrast: list[float] | None = None

    @property
    def active(self) -> bool:
        return any(bool(getattr(self, f.name)) for f in dataclasses.fields(self))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Assertion:
    """One `data.assertions` entry: checks on a feature the model receives (None: not checked)."""

    feature: str
    min: float | None = None
    max: float | None = None
    finite: bool | None = None
    non_negative: bool | None = None
    shape: list[int] | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class RecordFeature:
    """A feature stored in each record (`record_features`): its parse dtype and shape, and what it
    holds (`numeric`, `string`, `raw_image`, `jpeg`, `png`, `label`); an image's decoded shape."""

    dtype: str
    shape: list[int]
    kind: str
    image_shape: list[int] | None = None
    vocabulary: list[str] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The fields that are set, as a report shows them."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}


# A resolved section's fields typed beyond the schema's JSON types: its nested objects parsed.
_RESOLVED_TYPES: dict[str, tuple[Any, Any]] = {  # name -> (type, default or a factory's dataclasses.field)
    "format": (str, dataclasses.MISSING),
    "image": (ImageSpec | None, None),
    "feature_columns": (Mapping[str, ColumnSpec], dataclasses.field(default_factory=dict)),
    "augment": (Augment, dataclasses.field(default_factory=Augment)),
    "assertions": (tuple[Assertion, ...], ()),
    "label_offset": (int, 0),
}
# What resolution found, beyond the config's fields (`DataSpec`'s docstring).
_FOUND_FIELDS = [
    ("manifest_dir", str | None, None),
    ("manifest_splits", Mapping[str, Mapping[str, Any]], dataclasses.field(default_factory=dict)),
    ("manifest_num_classes", int | None, None),
    ("label_stats", Mapping[str, float] | None, None),
    ("table_raw", bool, False),
]


def _spec_field(field: dataclasses.Field) -> tuple[str, Any, Any]:
    """A field of the generated `data` view as a `DataSpec` field: its type (a nested object's parsed
    type), and its default (the schema's; None for a field the schema gives none)."""
    if field.name in _RESOLVED_TYPES:
        return (field.name, *_RESOLVED_TYPES[field.name])
    default = _SCHEMA_DEFAULTS.get(field.name)
    if isinstance(default, (dict, list)):
        default = dataclasses.field(default_factory=lambda value=default: copy.deepcopy(value))
    return field.name, field.type, default


def _replace(self, **fields: Any) -> DataSpec:
    """A copy with some fields replaced (e.g. the files a job on an export reads)."""
    return dataclasses.replace(self, **fields)


def _as_section(self) -> dict[str, Any]:
    """The spec as a plain `data` section, for a file (a run's archived config): the config's
    fields that are set (defaults included), not what resolution found."""
    out: dict[str, Any] = {}
    for field in dataclasses.fields(section_type("data")):
        value = getattr(self, field.name)
        if isinstance(value, (ImageSpec, Augment)):
            value = {k: v for k, v in dataclasses.asdict(value).items() if v is not None and v is not False}
        elif field.name == "feature_columns":
            value = columns_as_dicts(value)
        elif field.name == "assertions":
            value = [{k: v for k, v in dataclasses.asdict(a).items() if v is not None} for a in value]
        if value is not None or field.name in _SCHEMA_DEFAULTS:
            out[field.name] = copy.deepcopy(value)
    return out


# `DataSpec`: the generated `data` view (`config.section_type("data")`: its fields are the schema's,
# declared nowhere else) with its nested objects typed and what resolution found.
DataSpec = dataclasses.make_dataclass(
    "DataSpec",
    [*(_spec_field(f) for f in dataclasses.fields(section_type("data"))), *_FOUND_FIELDS],
    bases=(section_type("data"),), frozen=True, kw_only=True,
    namespace={
        "__doc__": """A resolved `data` section: the config's generated `data` view (its fields, from the
    JSON Schema, and the schema's defaults) with the manifest's fields filled in
    (`resolve_section`) and its nested objects typed (`ImageSpec`, `Augment`, `Assertion`, a
    table's `ColumnSpec`s), and what resolution found. Every reader of the data layer takes one.

    The resolved facts, beyond the config's fields:
      manifest_dir: the folder of `manifest` (its split patterns are relative to it).
      manifest_splits: the manifest's splits, {split: {pattern, count}}.
      manifest_num_classes: the manifest's `num_classes`.
      label_stats: a regression label's training mean and std (the table writer's manifest).
      table_raw: decode a table's raw values, not the model's numbers (what feeds an export's
        signatures, which do the preprocessing themselves).
    """,
        "replace": _replace,
        "as_section": _as_section,
        "skips_corrupt": property(lambda self: self.on_corrupt == "skip",
                                  doc='`data.on_corrupt: skip`: a corrupt file is read up to its first bad record.'),
    })
DataSpec.__module__ = __name__
