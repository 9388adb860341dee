"""The typed views of a config's nested objects: `debug.dump` (`DumpSpec`), `debug.watch`
(`WatchSpec`), `eval.early_stopping` (`EarlyStopping`) and `run.ps_partition` (`PsPartition`).

Frozen, keyword-only: a field is an attribute, spelled once here. `tpuestimator.config` parses
each of them once, where the config is loaded (`JobConfig`'s section views hold them), so no
later layer reads them by string key. The schema (`config.schema.json`) validates them first;
`parse_view` still names the field of a key a view does not declare (a view built from a dict
the schema never saw). The defaults here are what the code always used when a key is absent
(the schema declares none for these nested keys).

Layer 0: imports only `tpuestimator.errors`.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tpuestimator.errors import ConfigError


def parse_view(cls: type, value: Any, field: str):
    """`value` (a mapping, an instance of `cls`, or None) as a `cls`; None stays None.

    Raises:
      ConfigError: naming `<field>.<key>` for a key `cls` does not declare, or `field` for a
        value that is no mapping or lacks a required key.
    """
    if value is None or isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(field, value, f"a mapping of {', '.join(f.name for f in dataclasses.fields(cls))}")
    names = [f.name for f in dataclasses.fields(cls)]
    for key in value:
        if key not in names:
            raise ConfigError(f"{field}.{key}", value[key], f"a known field: one of {', '.join(names)}",
                              unknown=True)
    required = [f.name for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    for key in required:
        if key not in value:
            raise ConfigError(f"{field}.{key}", None, "this field is required")
    try:
        return cls(**value)
    except ValueError as exc:
        raise ConfigError(field, dict(value), str(exc)) from None


@dataclasses.dataclass(frozen=True, kw_only=True)
class DumpSpec:
    """`debug.dump`: Debugger V2 dumps of training steps `steps` = [first, last] into `dir`."""

    dir: str
    steps: list[int] | None = None
    mode: str = "FULL_HEALTH"
    op_regex: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class WatchSpec:
    """`debug.watch`: the model outputs printed at loop boundaries (TF1's `tf.Print`)."""

    outputs: list[str]
    first_n: int | None = None
    summarize: int = 3
    every_n_loops: int = 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class EarlyStopping:
    """Stop when `metric` has not improved by `min_delta` for `patience` evaluations
    (`eval.early_stopping`; `core.training.train_and_evaluate` takes it as it is). With
    `restore_best`, the best evaluation's weights are restored when training ends."""

    metric: str
    mode: str = "min"
    patience: int = 3
    min_delta: float = 0.0
    restore_best: bool = False

    def __post_init__(self):
        if self.mode not in ("min", "max"):
            raise ValueError(f"`mode` ({self.mode!r}) must be 'min' or 'max'.")
        if self.patience < 0:
            raise ValueError(f"`patience` ({self.patience}) must be >= 0.")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PsPartition:
    """`run.ps_partition`: a variable gets one shard per `min_shard_bytes` (None: TensorFlow's
    256 KiB), at most `max_shards` (None: the number of ps tasks)."""

    min_shard_bytes: int | None = None
    max_shards: int | None = None


# The nested objects of the sections, by (section, field): what `config.section_view` parses.
NESTED_VIEWS: dict[tuple[str, str], type] = {
    ("debug", "dump"): DumpSpec,
    ("debug", "watch"): WatchSpec,
    ("eval", "early_stopping"): EarlyStopping,
    ("run", "ps_partition"): PsPartition,
}
