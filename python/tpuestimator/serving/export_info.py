"""What tpuestimator writes beside an export, `assets.extra/tpuestimator.json`, as one typed
record: `ExportInfo`, read by `read_export_info` (the one reader: serving, jobs, tables and the R
bridge take its fields, never the file's keys) and written by `write_export_info`.

The file holds the training's data section as written (how raw records are read back), the class
names, the feature spec the model takes, the model's name and step, a table model's columns
(`TableInfo`) and the TFLite verification reports (`tflite`). Nothing here imports TensorFlow.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tpuestimator.errors import ConfigError
from tpuestimator.system.io import atomic_write_json

EXPORT_META = "tpuestimator.json"


@dataclasses.dataclass(frozen=True, kw_only=True)
class TableInfo:
    """The table a table model's export was trained on.

    Attributes:
      feature_columns: column name -> its manifest dict, as written (`models.column_spec.parse_columns`
        types them).
      task: ``classification`` or ``regression``.
      label: the label column's name.
    """

    feature_columns: Mapping[str, Mapping[str, Any]]
    task: str | None = None
    label: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"feature_columns": copy.deepcopy({name: dict(c) for name, c in self.feature_columns.items()}),
                "task": self.task, "label": self.label}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExportInfo:
    """An export's `assets.extra/tpuestimator.json`.

    Attributes:
      data: the training's `data` section as written (`data.spec.resolve_section` reads it); empty
        in an export without one.
      class_names: the classifier's class names, in class-id order (empty otherwise).
      feature_spec: feature name -> (shape without the batch dimension, dtype name).
      model: the model's name (`model` of the config), or None.
      global_step: the training step the export was taken at, or None.
      table: a table model's columns, task and label; None for other exports.
      tflite: the TFLite file name -> its verification report (`export --tflite`).
    """

    data: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    class_names: tuple[str, ...] = ()
    feature_spec: Mapping[str, tuple[tuple[int | None, ...], str]] = dataclasses.field(default_factory=dict)
    model: str | None = None
    global_step: int | None = None
    table: TableInfo | None = None
    tflite: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        for name in ("data", "feature_spec", "tflite"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    @property
    def task(self) -> str | None:
        """A table model's task (``classification``/``regression``), None for other exports."""
        return self.table.task if self.table is not None else None

    def with_tflite(self, report: Mapping[str, Any]) -> ExportInfo:
        """This record with one more TFLite report, under its `file` name."""
        return dataclasses.replace(self, tflite={**self.tflite, report["file"]: dict(report)})

    def to_dict(self) -> dict[str, Any]:
        """The file's content (JSON types): the keys the readers of older versions know."""
        out: dict[str, Any] = {
            "data": copy.deepcopy(dict(self.data)), "class_names": list(self.class_names),
            "feature_spec": {name: [list(shape), dtype] for name, (shape, dtype) in self.feature_spec.items()},
            "model": self.model, "global_step": self.global_step}
        if self.table is not None:
            out["table"] = self.table.to_dict()
        if self.tflite:
            out["tflite"] = {name: dict(report) for name, report in self.tflite.items()}
        return out

    @classmethod
    def from_dict(cls, meta: Mapping[str, Any], *, where: str = EXPORT_META) -> ExportInfo:
        """The record of a parsed file; `where` names the file in the error of a malformed one."""
        if not isinstance(meta, Mapping):
            raise ConfigError(where, type(meta).__name__, "a JSON object written by tpuestimator; export again "
                                                          "with `tpuestimator export`")
        try:
            spec = {str(name): (tuple(shape), str(dtype)) for name, (shape, dtype) in
                    (meta.get("feature_spec") or {}).items()}
            table = meta.get("table")
            step = meta.get("global_step")
            return cls(data=meta.get("data") or {}, class_names=tuple(str(c) for c in meta.get("class_names") or ()),
                       feature_spec=spec, model=meta.get("model"),
                       global_step=step if isinstance(step, int) and not isinstance(step, bool) else None,
                       table=TableInfo(feature_columns=dict(table.get("feature_columns") or {}),
                                       task=table.get("task"), label=table.get("label"))
                       if isinstance(table, Mapping) else None,
                       tflite=meta.get("tflite") or {})
        except (TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(where, str(exc), "the metadata tpuestimator writes (data, class_names, feature_spec); "
                                               "export again with `tpuestimator export`") from None


def export_info_path(export_dir: str | os.PathLike) -> Path:
    """`<export_dir>/assets.extra/tpuestimator.json`."""
    return Path(export_dir) / "assets.extra" / EXPORT_META


def read_export_info(export_dir: str | os.PathLike) -> ExportInfo | None:
    """The `ExportInfo` of an export, None when it has no metadata file (not tpuestimator's).

    Raises:
      ConfigError: naming the file, when it is not the JSON tpuestimator writes.
    """
    path = export_info_path(export_dir)
    if not path.is_file():
        return None
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(str(path), str(exc), "the JSON tpuestimator writes; export again with "
                                               "`tpuestimator export`") from None
    return ExportInfo.from_dict(meta, where=str(path))


def write_export_info(export_dir: str | os.PathLike, info: ExportInfo) -> None:
    """Writes `info` as the export's `assets.extra/tpuestimator.json`, atomically."""
    atomic_write_json(str(export_info_path(export_dir)), info.to_dict())
