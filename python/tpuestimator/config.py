"""Job configuration: load YAML/JSON, apply `--set` overrides, fill defaults, validate.

The JSON Schema in ``schema/config.schema.json`` is the single source of truth
(`schema.config_schema`); the typed section views are generated from it (`config_sections`),
and the rules across fields it cannot express are `config_rules`. The R package validates
through this module too. Nothing here imports TensorFlow, so every
invalid field fails before TensorFlow starts (a table's manifest on gs:// is read with it).

A table's early stopping is filled here (`apply_table_stopping`): it must see the config as
the user wrote it, before the schema's defaults hide whether `eval.early_stopping` was given,
so it belongs to the loader.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from tpuestimator.config_rules import check_semantics
from tpuestimator.config_sections import SECTIONS, section_type, section_view  # noqa: F401
from tpuestimator.errors import ConfigError
from tpuestimator.manifest import table_manifest
from tpuestimator.schema.config_schema import DEFAULTS, schema, schema_defaults, schema_path  # noqa: F401
from tpuestimator.schema.fields import config_error, unknown_field

# `DEFAULTS`, `schema()`, `schema_path()` (which R calls) and `section_type` are defined beside
# (schema/config_schema.py, config_sections.py) and imported from here as they always were.


class _Loader(yaml.SafeLoader):
    """YAML loader that reads `1e-3` as a float (YAML 1.1 wants `1.0e-3`; users write 1e-3)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"))


def _yaml_load(text: str):
    return yaml.load(text, Loader=_Loader)


# Fields holding file paths that are resolved against the config file's folder.
_PATH_FIELDS = (("data", "train"), ("data", "eval"), ("data", "manifest"), ("data", "vocabulary"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class JobConfig:
    """A validated job configuration.

    Attributes:
      raw: the full configuration as a plain dict, defaults filled in.
      source: the file it came from, or None for a dict.
      overrides: the `--set` overrides applied, as given.
    """

    raw: Mapping[str, Any]
    source: str | None = None
    overrides: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.raw["name"]

    @property
    def model(self) -> str:
        return self.raw["model"]

    @property
    def params(self) -> dict:
        return copy.deepcopy(dict(self.raw["params"]))

    # Typed views of the sections (`cfg.train.max_steps`): every field the schema declares,
    # and only those, so a field name is spelled in the schema and at its use, never as a
    # `raw["train"]["max_steps"]` string lookup (tests/python/test_architecture.py checks).
    # Parsed once, when the config is made (nested objects too: `cfg.debug.dump.dir`).
    def __post_init__(self):
        object.__setattr__(self, "_views", {name: section_view(self.raw, name) for name in SECTIONS})

    def __getstate__(self):  # pickled without the views (generated classes): made again when loaded
        return {key: value for key, value in self.__dict__.items() if key != "_views"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.__post_init__()

    data = property(lambda self: self._views["data"])
    train = property(lambda self: self._views["train"])
    eval = property(lambda self: self._views["eval"])
    predict = property(lambda self: self._views["predict"])
    export = property(lambda self: self._views["export"])
    run = property(lambda self: self._views["run"])
    debug = property(lambda self: self._views["debug"])

    @property
    def has_eval_data(self) -> bool:
        """Whether the job has evaluation data: `data.eval`, or a manifest (which holds the splits)."""
        return bool(self.data.eval) or self.data.manifest is not None

    @property
    def model_dir(self) -> str:
        return self.run.model_dir or os.path.join("models", self.name)

    def to_dict(self) -> dict:
        """A plain dict, where one must go: a file (config.yaml, a run's), R, new overrides."""
        return copy.deepcopy(dict(self.raw))

    def value_at(self, dotted: str) -> Any:
        """The value (a copy) at a field path known only at run time (a flag's `train.max_steps`,
        `params.learning_rate`; "" the whole config), None where the config has none. Code that
        knows the field reads it typed: `cfg.train.max_steps`."""
        node: Any = self.raw
        for part in dotted.split(".") if dotted else ():
            node = node.get(part) if isinstance(node, Mapping) else None
        return copy.deepcopy(node)

    def with_overrides(self, overrides: Iterable[str], *, flags: Mapping[str, Any] | None = None) -> JobConfig:
        """This config with `--set` strings and then a run's `flags` applied (as `load_config` applies
        them): a real change, validated again as a whole, the source kept (the run record's `script`)
        and the overrides added to those already applied."""
        overrides = tuple(overrides)
        if not overrides and not flags:
            return self
        raw = self.to_dict()
        for item in overrides:
            _apply_override(raw, item)
        overrides += _apply_flags(raw, flags)
        base = os.path.dirname(os.path.abspath(self.source)) if self.source else os.getcwd()
        _resolve_paths(raw, base)
        return _finish(raw, self.source, self.overrides + overrides, base_dir=base)

    def replace(self, **sections: Any) -> JobConfig:
        """A copy with whole sections merged in: a real change, so the changed sections are checked
        against the schema and the rules across sections run again (not the rest: loaded valid)."""
        raw = self.to_dict()
        for key, value in sections.items():
            if isinstance(value, Mapping) and isinstance(raw.get(key), Mapping):
                raw[key] = _deep_merge(raw[key], value)
            else:
                raw[key] = value
        validate({key: raw[key] for key in sections}, source=self.source, partial=True)
        check_semantics(raw, self.source)
        return JobConfig(raw=raw, source=self.source, overrides=self.overrides)


def load_config(source: str | os.PathLike | Mapping[str, Any], overrides: Iterable[str] = (),
                *, base_dir: str | None = None, flags: Mapping[str, Any] | None = None) -> JobConfig:
    """Loads, overrides, fills and validates a configuration.

    Args:
      source: a YAML or JSON file, or a dict (as R's `tpu_config()` passes).
      overrides: ``key.sub=value`` strings; values parse as YAML scalars (``1e-3``, ``true``,
        ``[1, 2]``, ``null``).
      base_dir: folder that relative data paths are resolved against; default the config
        file's folder, or the working directory for a dict.
      flags: a run's flags (R's `tpu_train(flags=)`, tfruns's `flags()`): names of fields or short
        names (`config_flags`), mapped on the config as read and applied after `overrides`, as
        their `--set` strings (kept in `overrides`); the config is validated once, with them.

    Returns:
      A `JobConfig`.

    Raises:
      ConfigError: naming the field, the bad value and what is allowed.
    """
    raw, src_name, base = _read_source(source, base_dir)
    overrides = tuple(overrides)
    for item in overrides:
        _apply_override(raw, item)
    raw.setdefault("name", "job")
    overrides += _apply_flags(raw, flags)
    _resolve_paths(raw, base)
    return _finish(raw, src_name, overrides, base_dir=base)


def flag_settings(source: str | os.PathLike | Mapping[str, Any], overrides: Iterable[str] = (),
                  flags: Mapping[str, Any] | None = None, *, base_dir: str | None = None,
                  params_defaults: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """The `--set` strings `load_config(source, overrides, flags=flags)` adds for `flags`, without
    validating anything: for a caller that hands the config on to the one load of its job (a
    cluster's tasks, a table written after its flags are checked). `params_defaults`: parameters
    the config leaves out but its model reads (a canned model's), so their short names map too.

    Raises:
      ConfigError: a flag that names no field, or a source that cannot be read.
    """
    raw, _, _ = _read_source(source, base_dir)
    for item in overrides:
        _apply_override(raw, item)
    if params_defaults:
        raw["params"] = {**dict(params_defaults), **dict(raw.get("params") or {})}
    return _flag_sets(raw, flags) if flags else ()


def _apply_flags(raw: dict, flags: Mapping[str, Any] | None) -> tuple[str, ...]:
    """Applies `flags` to `raw` (after its overrides) in place; returns their `--set` strings."""
    sets = _flag_sets(raw, flags) if flags else ()
    for item in sets:
        _apply_override(raw, item)
    return sets


def _flag_sets(raw: dict, flags: Mapping[str, Any]) -> tuple[str, ...]:
    from tpuestimator.config_flags import flag_overrides

    return tuple(flag_overrides(_deep_merge(copy.deepcopy(DEFAULTS), raw), flags))


def _read_source(source: str | os.PathLike | Mapping[str, Any], base_dir: str | None) -> tuple[dict, str | None, str]:
    """A config as read (a copy for a dict), its file's name (None for a dict) and the folder its
    relative paths resolve against."""
    if isinstance(source, Mapping):
        return copy.deepcopy(dict(source)), None, base_dir or os.getcwd()
    path = Path(source)
    if not path.is_file():
        raise ConfigError("config", str(source), "an existing YAML or JSON file (check the path)")
    text = path.read_text()
    try:
        raw = json.loads(text) if path.suffix == ".json" else _yaml_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise ConfigError("config", str(path), f"valid {'JSON' if path.suffix == '.json' else 'YAML'} ({exc})") from None
    if not isinstance(raw, dict):
        raise ConfigError("config", str(path), "a mapping of sections (model, data, train, ...)")
    raw.setdefault("name", path.stem.replace(" ", "_"))
    return raw, str(path), base_dir or str(path.parent.resolve())


def _finish(raw: dict, source: str | None, overrides: tuple[str, ...], base_dir: str | None) -> JobConfig:
    apply_table_stopping(raw)  # a table's training stops early unless its config says otherwise
    validate(raw, source=source)
    filled = _deep_merge(copy.deepcopy(DEFAULTS), raw)
    check_semantics(filled, source)
    return JobConfig(raw=filled, source=source, overrides=overrides)


def parse_override(item: str) -> tuple[list[str], Any]:
    """Splits ``a.b=value`` into (["a", "b"], parsed value)."""
    if "=" not in item:
        raise ConfigError("--set", item, "key.sub=value, e.g. --set train.batch_size=64")
    key, _, text = item.partition("=")
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError("--set", item, "a dotted key before '=', e.g. train.max_steps=1000")
    try:
        value = _yaml_load(text) if text.strip() else None
    except yaml.YAMLError:
        value = text
    return key.split("."), value


def check_field(key: str, *, origin: str = "--set") -> None:
    """Raises a `ConfigError` naming `key` (a dotted field from `origin`: --set, --grid, a
    tuning's flags) and the valid fields beside it when the schema has no such field
    (`tpuestimator.schema.fields.unknown_field`); any name below ``params`` is accepted."""
    error = unknown_field(schema(), key, origin=origin)
    if error is not None:
        raise error


def _apply_override(raw: dict, item: str) -> None:
    parts, value = parse_override(item)
    check_field(".".join(parts))
    node = raw
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            raise ConfigError(".".join(parts[: i + 1]), child, f"a section to hold `{'.'.join(parts)}`")
        node = child
    node[parts[-1]] = value


def _resolve_paths(raw: dict, base: str) -> None:
    for section, key in _PATH_FIELDS:
        sec = raw.get(section)
        if isinstance(sec, dict) and isinstance(sec.get(key), str):
            value = os.path.expanduser(sec[key])
            if not os.path.isabs(value) and not _is_remote(value):
                value = os.path.normpath(os.path.join(base, value))
            sec[key] = value


def _is_remote(path: str) -> bool:
    return "://" in path


def _deep_merge(base: dict, update: Mapping) -> dict:
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            base[key] = _deep_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def validate(raw: Mapping[str, Any], *, source: str | None = None, partial: bool = False) -> None:
    """Validates a configuration against the JSON Schema.

    `partial`: `raw` holds some sections only (`JobConfig.replace`); an unknown one still fails.

    Raises:
      ConfigError: for the first problem found (the most specific one), naming the field.
    """
    import jsonschema

    rules = {**schema(), "required": []} if partial else schema()
    validator_cls = jsonschema.validators.validator_for(rules)
    validator = validator_cls(rules)
    errors = sorted(validator.iter_errors(raw), key=lambda e: (len(list(e.absolute_path)), e.path))
    if not errors:
        return
    err = jsonschema.exceptions.best_match(errors)
    raise config_error(err, source)


def dump_config(cfg: JobConfig, path: str) -> None:
    """Writes the resolved configuration as YAML, atomically (a file: the plain dict, `to_dict`)."""
    from tpuestimator.system.io import atomic_write_text

    atomic_write_text(path, yaml.safe_dump(cfg.to_dict(), sort_keys=False))


# ---------------------------------------------------------------- a table's early stopping
# Issue 34 item 8 (`tpuestimator.tables.stopping` says why): a config naming a table's manifest
# stops early on its held-out split unless it says otherwise.
# Patience 5 of 10 evaluations: a run stops once the held-out loss has not improved for half
# of its planned evaluations; the best evaluation's weights are the ones exported.
TABLE_EARLY_STOPPING = {"metric": "loss", "mode": "min", "patience": 5, "restore_best": True}
RULE_FIELDS = ("metric", "mode", "patience", "min_delta", "restore_best")  # eval.early_stopping's
EVALUATIONS = 10  # evaluations planned over train.max_steps (every max_steps // 10 steps)


def metric_mode(metric: str) -> str:
    """'min' for a metric that is better lower (loss, error, mae, mse, rmse), else 'max'."""
    lower = ("loss", "error", "mae", "mse", "rmse")
    return "min" if any(word in str(metric) for word in lower) else "max"


def apply_table_stopping(raw: dict) -> None:
    """Fills `raw` (a config dict, before the schema's defaults) with a table's early stopping,
    in place; a config that is not a table's is left as it is."""
    data = raw.get("data")
    manifest = data.get("manifest") if isinstance(data, dict) else None
    table = table_manifest(manifest) if isinstance(manifest, str) else None
    if table is None:
        return
    section = raw.setdefault("eval", {})
    if section is None:
        section = raw["eval"] = {}
    if not isinstance(section, dict):
        return  # the schema names the bad section
    if "early_stopping" not in section:
        section["early_stopping"] = dict(TABLE_EARLY_STOPPING)
    rule = section["early_stopping"]
    if rule is False:
        section["early_stopping"] = None  # `--set eval.early_stopping=false` reads as off
    if not isinstance(rule, dict):
        return
    metric = rule.get("metric", TABLE_EARLY_STOPPING["metric"])
    section["early_stopping"] = {**TABLE_EARLY_STOPPING, "mode": metric_mode(metric), **rule}
    if section.get("every_n_steps") is None:
        train = raw.get("train") if isinstance(raw.get("train"), dict) else {}
        steps = train.get("max_steps") or train.get("steps")
        if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
            rows = table.split("train").get("count")
            batch = train.get("batch_size") or DEFAULTS["train"]["batch_size"]
            epoch = -(-int(rows) // int(batch)) if isinstance(rows, int) and isinstance(batch, int) else None
            every, loop = evaluation_cadence(steps, train.get("iterations_per_loop"), epoch)
            section["every_n_steps"] = every
            if loop is not None:
                raw.setdefault("train", {})["iterations_per_loop"] = loop


def evaluation_cadence(steps: int, iterations_per_loop: Any, epoch_steps: int | None = None) -> tuple[int, int | None]:
    """(eval.every_n_steps, train.iterations_per_loop to set or None): an evaluation every
    `steps / EVALUATIONS` steps, or every epoch (`epoch_steps`) when that is sooner: small
    tables overfit within a few epochs (infert's `dnn`, 198 training rows: the held-out loss
    is lowest after 25 steps, 4 epochs). Evaluations happen at loop boundaries: with the
    default loop (100 steps) the cadence is rounded down to a divisor of 100 (1, 2, 4, 5, 10,
    20, 25, 50) or a multiple of it, the loop shortened to match; a loop the config sets
    rounds the cadence to its multiples."""
    every = max(1, steps // EVALUATIONS)
    if epoch_steps:
        every = max(1, min(every, epoch_steps))
    if isinstance(iterations_per_loop, int) and not isinstance(iterations_per_loop, bool) and iterations_per_loop > 0:
        return max(iterations_per_loop, every // iterations_per_loop * iterations_per_loop), None
    default_loop = DEFAULTS["train"]["iterations_per_loop"]
    if every >= default_loop:
        return every // default_loop * default_loop, None
    every = max(d for d in range(1, every + 1) if default_loop % d == 0)
    return every, every
