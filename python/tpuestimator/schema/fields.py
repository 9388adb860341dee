"""Whether a dotted config field exists in the schema: a misspelt ``--set``/``--grid`` key is
named with the valid fields beside it, before anything runs. Takes the parsed schema
(`tpuestimator.config.schema()`), so it imports nothing of the package but its errors."""
from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

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


def _field_name(path: Iterable) -> str:
    parts = []
    for p in path:
        parts.append(f"[{p}]" if isinstance(p, int) else str(p))
    return ".".join(parts).replace(".[", "[") or "config"


def config_error(err, source: str | None) -> ConfigError:
    """A jsonschema validation error as one `ConfigError` naming the field, the value and what is allowed."""
    field = _field_name(err.absolute_path)
    kind = err.validator
    spec = err.validator_value
    if kind == "additionalProperties":
        allowed_keys = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed_keys))
        name = extra[0] if extra else "?"
        full = f"{field}.{name}" if field != "config" else name
        hint = difflib.get_close_matches(name, allowed_keys, n=1)
        allowed = "one of " + ", ".join(allowed_keys)
        if hint:
            allowed += f" (did you mean `{hint[0]}`?)"
        return ConfigError(full, err.instance.get(name), f"a known field: {allowed}", source=source, unknown=True)
    if kind == "required":
        missing = [k for k in spec if k not in err.instance]
        full = f"{field}.{missing[0]}" if field != "config" else missing[0]
        return ConfigError(full, None, f"this field is required: {err.schema.get('properties', {}).get(missing[0], {}).get('description', 'set it')}", source=source)
    if kind == "enum":
        return ConfigError(field, err.instance, "one of " + ", ".join(repr(v) for v in spec), source=source)
    if kind == "type":
        types = spec if isinstance(spec, list) else [spec]
        return ConfigError(field, err.instance, "a value of type " + " or ".join(types), source=source)
    if kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        sym = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}[kind]
        return ConfigError(field, err.instance, f"a number {sym} {spec}", source=source)
    if kind in ("minItems", "maxItems"):
        return ConfigError(field, err.instance, f"a list with {'at least' if kind == 'minItems' else 'at most'} {spec} items", source=source)
    if kind == "pattern":
        what = f" ({err.schema['description']})" if "description" in err.schema else ""  # e.g. grpc://HOST:PORT
        return ConfigError(field, err.instance, f"a string matching {spec}{what}", source=source)
    if kind == "minLength":
        return ConfigError(field, err.instance, "a non-empty string", source=source)
    if kind == "uniqueItems":
        return ConfigError(field, err.instance, "a list without repeats", source=source)
    return ConfigError(field, err.instance, err.message, source=source)
