"""The built-in models' params, typed: read once from the params dict, then read by attribute.

A model function receives `params`, a plain dict (`model_fn(params)`, the contract of every
model function, the user's included: `params["num_classes"]` in a user's model keeps working).
The job puts there what the data defines (`with_data`, called by `jobs.from_config.model_params`):
`task`, `num_classes`, `vocabulary`, a table's `feature_columns` and a regression label's
`label_stats`. The built-in models parse the dict once, into:

- `DataParams`: those facts (every built-in model, the jobs that check labels, the input pipeline);
- `LinearParams`, `DNNParams`, `WideAndDeepParams` (`CANNED`): a canned table model's params
  with their documented defaults (docs/tables.md), checked when parsed: a bad value is a
  `ConfigError` naming `params.<field>`. `PARAM_DEFAULTS` is their defaults as plain params
  (`tables.api` looks a run's short flag names up there).

This module alone reads those keys by string (tests/python/test_architecture.py). No TensorFlow.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

from tpuestimator.errors import ConfigError, ModelFnError
from tpuestimator.models.column_spec import ColumnSpec, columns_as_dicts, parse_columns
from tpuestimator.models.feature_columns import check_input_names

TASKS = ("classification", "regression")
LOSSES = ("mse", "huber")
OPTIMIZERS = ("adam", "sgd", "adagrad", "ftrl", "rmsprop")


@dataclasses.dataclass(frozen=True, kw_only=True)
class LabelStats:
    """A regression label's training mean and std (a table's manifest: `label_stats`)."""

    mean: float
    std: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataParams:
    """What the data defines, in a model's params. `num_classes`, `vocabulary`: None when the
    data names no classes (`vocabulary`: the params' list of class names, None when they hold
    none); `task` is `classification` unless the params (or the table) say. Parsing checks
    nothing (a user's model reads these keys as it likes): `classes()` checks `num_classes`."""

    task: str = "classification"
    num_classes: int | None = None
    vocabulary: tuple[str, ...] | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> DataParams:
        """The params' data facts (a user's model may put anything else there: it is not read)."""
        return cls(**_data_values(params))

    @property
    def is_regression(self) -> bool:
        return self.task == "regression"

    def classes(self) -> int:
        """`num_classes`, for a classifier.

        Raises:
          ModelFnError: when it is no positive integer.
        """
        n = self.num_classes
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ModelFnError(f"params['num_classes'] must be a positive integer. Received: num_classes={n!r}")
        return n

    @property
    def class_names(self) -> list[str] | None:
        return list(self.vocabulary) if self.vocabulary is not None else None


def _data_values(params: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if params.get("task") is not None:
        out["task"] = params["task"]
    if params.get("num_classes") is not None:
        out["num_classes"] = params["num_classes"]
    if isinstance(params.get("vocabulary"), (list, tuple)):  # a user's model may keep other things there
        out["vocabulary"] = tuple(str(v) for v in params["vocabulary"])
    return out


def with_data(params: dict, *, task: str | None, num_classes: int | None, vocabulary: list[str] | None,
              feature_columns: Mapping[str, ColumnSpec] | None = None,
              label_stats: Mapping[str, float] | None = None) -> dict:
    """`params` (a config's, a plain dict) with what the data defines added where the params leave
    it out: the dict every model function receives.

    Raises:
      ConfigError: naming `params.task` when it contradicts the table's, or `params.num_classes`
        when it contradicts the vocabulary's size.
    """
    out = dict(params)
    given = DataParams.from_params(params)
    if feature_columns and "feature_columns" not in out:  # the manifest's dicts: params stay plain
        out["feature_columns"] = columns_as_dicts(feature_columns)
    if task:
        if "task" in out and given.task != task:
            raise ConfigError("params.task", given.task, f"{task}: the table's label is "
                              f"{'a number' if task == 'regression' else 'a class'}")
        out["task"] = task
    regression = out.get("task") == "regression"
    if label_stats and regression and "label_stats" not in out:  # the canned regressors' label scale
        out["label_stats"] = dict(label_stats)
    if vocabulary and "vocabulary" not in out:
        out["vocabulary"] = list(vocabulary)
    if "num_classes" not in out and not regression and num_classes:
        out["num_classes"] = int(num_classes)
    if vocabulary and out.get("num_classes") and len(vocabulary) != out["num_classes"]:
        raise ConfigError("params.num_classes", out["num_classes"],
                          f"the vocabulary's size ({len(vocabulary)} classes in data.vocabulary)")
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class CannedParams(DataParams):
    """A canned table model's params: the table's columns, the head's settings (heads.py) and
    the optimizer (`optimizer` at `learning_rate`; each family sets their defaults)."""

    feature_columns: Mapping[str, ColumnSpec]
    label_stats: LabelStats | None = None
    standardize_label: bool = True
    loss: str = "mse"
    huber_delta: float = 1.0
    optimizer: str
    learning_rate: float

    # the family's own settings: its `PARAM_DEFAULTS` (what a run's short flag names may set)
    SETTINGS: ClassVar[tuple[str, ...]] = ("optimizer", "learning_rate")

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> CannedParams:
        """The params of this canned model, checked.

        Raises:
          ModelFnError: when the params hold no table's columns.
          ConfigError: naming `params.<field>` for a value out of its range.
        """
        columns = params.get("feature_columns")
        if not columns:
            raise ModelFnError("this model needs a table: write one with `tpuestimator data write table.csv --label y` "
                               "(or tpuestimator.tables.write_table) and name its manifest in data.manifest.")
        check_input_names(list(columns), where="data.feature_columns")
        values = {**_data_values(params), "feature_columns": parse_columns(columns, where="params.feature_columns")}
        names = {f.name for f in dataclasses.fields(cls)} - {"feature_columns", "label_stats", *values}
        values.update({name: params[name] for name in names if name in params})
        if params.get("label_stats"):
            values["label_stats"] = _label_stats(params["label_stats"])
        return cls(**values)

    def __post_init__(self):
        _check(self.task in TASKS, "task", self.task, " | ".join(TASKS))
        if self.is_regression:
            _check(self.loss in LOSSES, "loss", self.loss, " | ".join(LOSSES))
        for prefix in ("", "linear_"):
            if hasattr(self, f"{prefix}optimizer"):
                kind, rate = getattr(self, f"{prefix}optimizer"), getattr(self, f"{prefix}learning_rate")
                _check(kind in OPTIMIZERS, f"{prefix}optimizer", kind, " | ".join(OPTIMIZERS))
                _check(_number(rate) and rate > 0, f"{prefix}learning_rate", rate, "a number > 0, e.g. 0.01")
        _check(_number(self.huber_delta) and self.huber_delta > 0, "huber_delta", self.huber_delta, "a number > 0")
        _check(isinstance(self.standardize_label, bool), "standardize_label", self.standardize_label, "true | false")

    @staticmethod
    def on_table(params: Mapping[str, Any]) -> bool:
        """Whether the params hold a table's columns (`linear` on other data is `tabular.linear`)."""
        return bool(params.get("feature_columns"))

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """The family's settings' defaults, as plain params."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        return {name: list(fields[name].default) if isinstance(fields[name].default, tuple) else fields[name].default
                for name in cls.SETTINGS}

    def units(self) -> int:
        """How many numbers the model computes: 1 for regression and for binary classification
        (one logit: an L2 penalty on its weights is logistic regression's; two softmax logits would
        share the penalty between two weight vectors and halve it), else `num_classes`."""
        if self.is_regression:
            return 1
        n = self.classes()
        return 1 if n == 2 else n


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check(ok: bool, field: str, value: Any, fix: str) -> None:
    if not ok:
        raise ConfigError(f"params.{field}", value, fix)


def _label_stats(stats: Any) -> LabelStats:
    try:
        mean, std = float(stats["mean"]), float(stats["std"])
    except (KeyError, TypeError, ValueError):
        mean, std = 0.0, -1.0
    if not std > 0:
        raise ConfigError("params.label_stats", stats, "{mean: m, std: s} with s > 0 (the training label's)")
    return LabelStats(mean=mean, std=std)


@dataclasses.dataclass(frozen=True, kw_only=True)
class LinearParams(CannedParams):
    """`linear`: `l2_regularization` adds `l2_regularization * sum(w**2)` over the weights."""

    optimizer: str = "ftrl"
    learning_rate: float = 0.2
    l2_regularization: float = 0.0

    SETTINGS: ClassVar[tuple[str, ...]] = ("optimizer", "learning_rate", "l2_regularization")

    def __post_init__(self):
        super().__post_init__()
        _check(_number(self.l2_regularization) and self.l2_regularization >= 0, "l2_regularization",
               self.l2_regularization, "a number >= 0 (0: no penalty), e.g. 0.001")


@dataclasses.dataclass(frozen=True, kw_only=True)
class DNNParams(CannedParams):
    """`dnn`: `hidden_units` dense layers (ReLU, optional `batch_norm`, `dropout`)."""

    optimizer: str = "adam"
    learning_rate: float = 0.001
    hidden_units: tuple[int, ...] = (64, 32)
    dropout: float = 0.0
    batch_norm: bool = False

    SETTINGS: ClassVar[tuple[str, ...]] = ("optimizer", "learning_rate", "hidden_units", "dropout", "batch_norm")

    def __post_init__(self):
        super().__post_init__()
        hidden = self.hidden_units
        _check(isinstance(hidden, (list, tuple)) and all(isinstance(u, int) and not isinstance(u, bool) and u > 0
                                                        for u in hidden),
               "hidden_units", hidden, "a list of positive integers, e.g. [64, 32]")
        object.__setattr__(self, "hidden_units", tuple(hidden))
        dropout = 0.0 if self.dropout is None else self.dropout
        _check(_number(dropout) and 0 <= dropout < 1, "dropout", self.dropout, "a number in [0, 1), e.g. 0.1")
        object.__setattr__(self, "dropout", float(dropout))
        _check(isinstance(self.batch_norm, bool), "batch_norm", self.batch_norm, "true | false")


@dataclasses.dataclass(frozen=True, kw_only=True)
class WideAndDeepParams(DNNParams):
    """`wide_and_deep`: the dnn's settings, plus the wide part's optimizer (DNNLinearCombined's
    Ftrl by default) and `l2_regularization`."""

    linear_optimizer: str = "ftrl"
    linear_learning_rate: float = 0.05
    l2_regularization: float = 0.0

    SETTINGS: ClassVar[tuple[str, ...]] = (*DNNParams.SETTINGS, "linear_optimizer", "linear_learning_rate",
                                           "l2_regularization")

    def __post_init__(self):
        super().__post_init__()
        _check(_number(self.l2_regularization) and self.l2_regularization >= 0, "l2_regularization",
               self.l2_regularization, "a number >= 0 (0: no penalty), e.g. 0.001")


# The canned models' typed params, by model name. The optimizers and learning rates are
# benchmarks/bench_tables_defaults.py's choice over 10 real tables (docs/tables.md;
# benchmarks/tables_defaults_results.md): `linear` at Adam 0.05 was 1.46x least squares' RMSE on
# Ames house prices, at Ftrl 0.2 0.87x.
CANNED: dict[str, type[CannedParams]] = {"linear": LinearParams, "dnn": DNNParams, "wide_and_deep": WideAndDeepParams}
PARAM_DEFAULTS: dict[str, dict[str, Any]] = {name: family.defaults() for name, family in CANNED.items()}
