"""Whether a dotted config field exists in the schema: a misspelt ``--set``/``--grid`` key is
named with the valid fields beside it, before anything runs. Takes the parsed schema
(`tpuestimator.config.schema()`), so it imports nothing of the package but its errors."""
from __future__ import annotations

import difflib
from collections.abc import Mapping

from tpuestimator.errors import ConfigError


def unknown_field(schema: Mapping, key: str, *, origin: str) -> ConfigError | None:
    """The `ConfigError` for `key` (``train.max_step``) when `schema` has no such field, else
    None. Sections that take any key (``params``: a model function's own parameters) accept
    every name below them; `origin` (``--set``, ``--grid``, ``flag``) is named in the message."""
    node = schema
    parts = key.split(".")
    for i, part in enumerate(parts):
        properties = _object_properties(node)
        if properties is None:
            return None
        if part not in properties:
            if node.get("additionalProperties", True) is not False:
                return None
            names = sorted(properties)
            hint = difflib.get_close_matches(part, names, n=1)
            if i == 0 and not hint:
                hint = _dotted_hint(schema, key)
            where = f"in `{'.'.join(parts[:i])}`" if i else "at the top level"
            return ConfigError(key, None, f"{where}, one of {', '.join(names)}"
                               + (f" (did you mean `{hint[0]}`?)" if hint else "")
                               + f"; named by {origin} {key}=...", unknown=True)
        node = properties[part]
    return None


def _dotted_hint(schema: Mapping, key: str) -> list[str]:
    """A short name given without its section (``learnin_rate``): the dotted field whose last
    part is closest (``params.learning_rate``), or nothing."""
    by_leaf: dict[str, str] = {}

    def walk(node: Mapping, prefix: str) -> None:
        for name, child in (_object_properties(node) or {}).items():
            by_leaf.setdefault(name, f"{prefix}{name}")
            if isinstance(child, Mapping):
                walk(child, f"{prefix}{name}.")

    walk(schema, "")
    close = difflib.get_close_matches(key.split(".")[-1], sorted(by_leaf), n=1)
    return [by_leaf[close[0]]] if close and "." in by_leaf[close[0]] else []


def _object_properties(node: Mapping) -> Mapping | None:
    """The named fields of a schema node (an object, or the object among `anyOf`/`oneOf`)."""
    if "properties" in node:
        return node["properties"]
    for alternative in (*node.get("anyOf", ()), *node.get("oneOf", ())):
        if "properties" in alternative:
            return alternative["properties"]
    return None
