"""The typed views of a config's sections (`cfg.train`, `cfg.data`, ...): frozen dataclasses
generated from the JSON Schema (`section_type`), one per section, filled from a config dict with
its nested objects parsed into their `config_views` (`section_view`)."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from functools import cache
from typing import Any

from tpuestimator.config_views import NESTED_VIEWS, parse_view
from tpuestimator.schema.config_schema import DEFAULTS, schema

# The sections that have typed views (`cfg.train`, ...); `name`, `model` and `params` are read as they are.
SECTIONS = ("data", "train", "eval", "predict", "export", "run", "debug")


_JSON_TYPES = {"integer": int, "number": float, "string": str, "boolean": bool, "array": list, "object": dict,
               "null": type(None)}


def _field_type(node: Mapping[str, Any]):
    """The annotation of a schema field ("integer" -> int, ["string", "null"] -> str | None, enum -> Any)."""
    kinds = node.get("type", [])
    types = [_JSON_TYPES[k] for k in ([kinds] if isinstance(kinds, str) else kinds)]
    annotation = types[0] if types else Any
    for extra in types[1:]:
        annotation = annotation | extra
    return annotation


@cache
def section_type(name: str) -> type:
    """The frozen dataclass of one config section, generated from the schema: one field per
    declared field, typed from its JSON type (`section_type("train")(batch_size=..., ...)`).
    Generated, not hand-written, so a field added to the schema needs no second declaration."""
    node = schema()["properties"][name]
    fields = [(key, NESTED_VIEWS[name, key] | None if (name, key) in NESTED_VIEWS else _field_type(field))
              for key, field in node.get("properties", {}).items()]
    cls = dataclasses.make_dataclass(f"{name.title()}Section", fields, frozen=True, kw_only=True,
                                     namespace={"__doc__": f"The `{name}` section of a job configuration "
                                                           "(fields and types from the JSON Schema)."})
    cls.__module__ = __name__
    return cls


def section_view(raw: Mapping[str, Any], name: str):
    """The `name` section of a filled config dict as its `section_type` (fields absent from
    the dict, such as data fields without a default, read None); its nested objects parsed into
    their views (`config_views.NESTED_VIEWS`: `debug.dump` -> `DumpSpec`, ...)."""
    values = dict(raw.get(name) or {})
    for (section, key), view in NESTED_VIEWS.items():
        if section == name:
            values[key] = parse_view(view, values.get(key), f"{name}.{key}")
    cls = section_type(name)
    return cls(**{field.name: values.get(field.name) for field in dataclasses.fields(cls)})


def section_as_written(view) -> dict[str, Any]:
    """A section view as the plain dict a file holds (`JobConfig.to_dict()`'s section): every field
    with a value, and those the schema gives a default even when it is None."""
    name = type(view).__name__.removesuffix("Section").lower()
    defaults = DEFAULTS.get(name, {})
    return {key: value for key, value in dataclasses.asdict(view).items() if value is not None or key in defaults}
