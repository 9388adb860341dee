"""`ColumnSpec`: one feature column of a table, typed (the `models.feature_columns` contract).

The manifest keeps a column as a JSON dict (users read and edit it there); the data layer parses
each one once into a `ColumnSpec` when it resolves the data section (`data.spec.resolve_section`,
after the config's `data.feature_columns` overrides are merged in), and every reader (the
decoder, the record diagnosis, the preprocessing layers, the canned models) reads its fields as
attributes. `as_dict()` gives the manifest's dict back, for a file (an export's metadata, a
run's archived config) or R.

Fields left None are absent from the manifest's column; the properties give the policy that
applies then (`oov_buckets` 1, `missing` "error", `part` "both", `normalize` True).

No TensorFlow.
"""
from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any

from tpuestimator.errors import ConfigError

# A categorical column's out-of-vocabulary buckets when its manifest column names none.
OOV_BUCKETS = 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class ColumnSpec:
    """A table's feature column (see `models.feature_columns` for what each type means)."""

    type: str
    dtype: str | None = None
    encoding: str | None = None
    embedding_dim: int | None = None
    missing: str | None = None
    part: str | None = None
    vocabulary: list | None = None
    oov_buckets: int | None = None
    boundaries: list[float] | None = None
    buckets: int | None = None
    columns: list[str] | None = None
    mean: float | None = None
    variance: float | None = None
    normalize: bool | None = None

    @classmethod
    def parse(cls, name: str, column: Mapping[str, Any] | ColumnSpec, *, where: str = "feature_columns",
              source: str | None = None) -> ColumnSpec:
        """The column `name` of a manifest (a dict), or `column` itself when already parsed.

        Raises:
          ConfigError: naming `<where>.<name>.<key>` for a key no column has (a misspelt
            field in the manifest or in `data.feature_columns`), or `<where>.<name>` for a
            column that is no mapping or has no `type`.
        """
        if isinstance(column, ColumnSpec):
            return column
        field = f"{where}.{name}"
        if not isinstance(column, Mapping):
            raise ConfigError(field, column, "a mapping of column fields, e.g. {type: categorical}", source=source)
        known = [f.name for f in dataclasses.fields(cls)]
        for key in column:
            if key not in known:
                hint = difflib.get_close_matches(str(key), known, n=1)
                raise ConfigError(f"{field}.{key}", column[key], f"a field of column {name!r}: one of "
                                  f"{', '.join(known)}" + (f" (did you mean `{hint[0]}`?)" if hint else ""),
                                  source=source, unknown=True)
        if "type" not in column:
            raise ConfigError(f"{field}.type", None, "the column's type: numeric | bucketized | categorical | "
                              "hashed | identity | crossed", source=source)
        return cls(**column)

    def as_dict(self) -> dict[str, Any]:
        """The manifest's dict of this column: the fields that are set."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}

    @property
    def missing_policy(self) -> str:
        """What a missing value becomes: `error` (the default), `mean`, `zero` or `oov`."""
        return self.missing or "error"

    @property
    def model_part(self) -> str:
        """Which part of a wide-and-deep model reads it: `wide`, `deep` or `both` (the default)."""
        return self.part or "both"

    @property
    def normalized(self) -> bool:
        """A numeric column is normalised by its mean and variance unless `normalize: false`."""
        return self.normalize is not False

    @property
    def stored(self) -> bool:
        """Whether the records hold the column (all but crosses, which are computed)."""
        return self.type != "crossed"

    @property
    def cardinality(self) -> int:
        """The number of distinct indices a non-numeric column produces."""
        if self.type == "categorical":
            return len(self.vocabulary) + int(OOV_BUCKETS if self.oov_buckets is None else self.oov_buckets)
        if self.type == "bucketized":
            return len(self.boundaries) + 1
        if self.type == "identity":
            return int(self.buckets) + 1
        if self.type in ("hashed", "crossed"):
            return int(self.buckets)
        raise ValueError(f"column type {self.type!r} has no cardinality")

    def missing_default(self):
        """The value a missing entry takes under the column's policy (None: the policy is `error`)."""
        policy = self.missing_policy
        if policy == "error":
            return None
        if policy == "mean":
            return float(self.mean if self.mean is not None else 0.0)
        if policy == "zero":
            return 0 if self.dtype == "int64" else (0.0 if self.dtype == "float32" else "")
        return "" if self.dtype == "string" else -1  # oov: a value no vocabulary holds


def parse_columns(columns: Mapping[str, Any] | None, *, where: str = "feature_columns",
                  source: str | None = None) -> dict[str, ColumnSpec]:
    """A table's columns (name -> manifest dict, or already `ColumnSpec`s) as `ColumnSpec`s."""
    return {name: ColumnSpec.parse(name, column, where=where, source=source) for name, column in (columns or {}).items()}


def columns_as_dicts(columns: Mapping[str, ColumnSpec]) -> dict[str, dict[str, Any]]:
    """The columns as the manifest writes them (a file, an export's metadata, R)."""
    return {name: column.as_dict() for name, column in columns.items()}
