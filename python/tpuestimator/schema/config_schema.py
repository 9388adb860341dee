"""The configuration's JSON Schema, parsed (`schema()`), its file (`schema_path()`, which the R
package reads) and the defaults it declares (`DEFAULTS`: the one source of every default)."""
from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from typing import Any

SCHEMA_RESOURCE = "config.schema.json"


def schema_defaults(schema_dict: Mapping[str, Any]) -> dict[str, Any]:
    """The defaults the schema declares (`"default"` of each section's fields), as a config dict:
    {"params": {}, "train": {"batch_size": 128, ...}, ...}. Fields without a default are absent."""
    out: dict[str, Any] = {}
    for name, node in schema_dict.get("properties", {}).items():
        if "default" in node:
            out[name] = copy.deepcopy(node["default"])
            continue
        fields = {key: copy.deepcopy(field["default"]) for key, field in node.get("properties", {}).items()
                  if isinstance(field, Mapping) and "default" in field}
        if fields:
            out[name] = fields
    return out


@lru_cache(maxsize=1)
def schema() -> dict:
    """The configuration's JSON Schema (parsed)."""
    text = resources.files("tpuestimator.schema").joinpath(SCHEMA_RESOURCE).read_text()
    return json.loads(text)


# Every default of a config, from the schema: the one source (the R package reads the same file).
DEFAULTS: dict[str, Any] = schema_defaults(schema())

def schema_path() -> str:
    """Filesystem path of the JSON Schema file (the R package reads it)."""
    return str(resources.files("tpuestimator.schema").joinpath(SCHEMA_RESOURCE))
