"""A run's flags as configuration overrides (tfruns's ``flags()`` from R, ``tpu_train(flags=)``).

A flag names a configuration field in one of two ways:

- its dotted path, as ``--set`` takes it: ``params.learning_rate``, ``train.max_steps``;
- a short name without a dot, looked up in this order: a top-level field (``model``), a key of
  the configuration's ``params`` (``learning_rate`` is ``params.learning_rate``), a field of
  ``train`` (``max_steps``, ``batch_size``), then of ``eval``.

A name that is neither is an error listing the fields a flag can name, so a typo in a tuning
script stops the run instead of training the same model under every flag value. The flags of
a run record (``flags.json``) use the same short names for the params, so a run's flags can be
fed back as they are. TensorFlow-free.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tpuestimator.config import JobConfig, check_field, schema
from tpuestimator.errors import ConfigError
from tpuestimator.schema.fields import unknown_field

# Where a short name (no dot) is looked up, in order; "" is the top level.
SHORT_NAME_SECTIONS = ("", "params", "train", "eval")
# The help's length: reticulate 1.28 fails with a C++ out_of_range error on a Python message
# of about 1,000 characters or more, so R would see that instead of this error.
_HELP_LIMIT = 600


def override_text(name: str, value: Any) -> str:
    """``name=value`` as ``--set`` reads it (text, e.g. from the command line, is kept as typed)."""
    if isinstance(value, str):
        return f"{name}={value}"
    if isinstance(value, bool):
        return f"{name}={'true' if value else 'false'}"
    return f"{name}={json.dumps(value)}"


def _fields(node: Any, prefix: str) -> list[str]:
    if not isinstance(node, Mapping):
        return [prefix]
    out: list[str] = []
    for key, value in node.items():
        out += _fields(value, f"{prefix}.{key}" if prefix else str(key))
    return out


def flag_field(cfg: JobConfig, name: str) -> str | None:
    """The dotted field a flag named `name` sets in `cfg`, or None when it names none."""
    if "." in name:
        return name if unknown_field(schema(), name, origin="flag") is None else None
    for section in SHORT_NAME_SECTIONS:
        node = cfg.value_at(section)
        if isinstance(node, Mapping) and name in node and (section or not isinstance(node[name], Mapping)):
            return f"{section}.{name}" if section else name
    return None


def _flag_help(cfg: JobConfig) -> str:
    """What a flag may be named: the short names' fields, then a pointer to the rest."""
    top = [k for k, v in cfg.value_at("").items() if not isinstance(v, Mapping)]
    fields = top + [f for section in SHORT_NAME_SECTIONS[1:] for f in _fields(cfg.value_at(section) or {}, section)]
    listed = ""
    for field in fields:
        if len(listed) + len(field) > _HELP_LIMIT:
            listed += ", ..."
            break
        listed += (", " if listed else "") + field
    return ("flag names that are configuration fields: a dotted path (params.learning_rate, run.seed, any "
            "field) or a short name found at the top, then in params, then train, then eval: " + listed
            + ". Leave out of `flags` the flags your script uses for itself")


def flag_overrides(cfg: JobConfig, flags: Mapping[str, Any]) -> list[str]:
    """``key=value`` overrides (as ``load_config(overrides=)`` takes them) for `flags`.

    Raises:
      ConfigError: naming every flag that names no field, with the fields a flag can name.
    """
    out: list[str] = []
    unknown: dict[str, Any] = {}
    for name, value in dict(flags).items():
        if "." in str(name):  # a dotted field: the schema's own error, with its suggestions
            check_field(str(name), origin="flag")
        field = flag_field(cfg, str(name))
        if field is None:
            unknown[str(name)] = value
            continue
        out.append(override_text(field, value))
    if unknown:
        raise ConfigError("flags", ", ".join(f"{k}={v!r}" for k, v in unknown.items()), _flag_help(cfg))
    return out
