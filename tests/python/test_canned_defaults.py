"""The canned table models' default optimizers and learning rates (issue 34, item 10) are the
ones docs/tables.md documents, which are the ones benchmarks/tables_defaults_results.md (written
by benchmarks/bench_tables_defaults.py) marks as chosen from its measurements: read from the
optimizers of the models built without those params."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from tpuestimator.models import canned
from tpuestimator.models.params import PARAM_DEFAULTS
from tpuestimator.tables import infer_feature_columns

REPO = Path(__file__).resolve().parents[2]
KERAS_NAMES = {"adam": "Adam", "ftrl": "Ftrl", "adagrad": "Adagrad", "sgd": "SGD", "rmsprop": "RMSprop"}


def documented_defaults() -> dict[str, dict]:
    """model -> {param: value} of docs/tables.md's table of defaults (header `| model | optimizer | ...`)."""
    lines = (REPO / "docs" / "tables.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| model | `optimizer` |"))
    header = [c.strip().strip("`") for c in lines[start].strip("|").split("|")]
    out = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = dict(zip(header, (c.strip().strip("`") for c in line.strip("|").split("|"))))
        params = {}
        for name in ("optimizer", "learning_rate", "linear_optimizer", "linear_learning_rate", "hidden_units"):
            value = cells.get(name, "")
            if value in ("", "-"):
                continue
            params[name] = (float(value) if "learning_rate" in name else
                            [int(u) for u in re.findall(r"\d+", value)] if name == "hidden_units" else value.lower())
        out[cells["model"]] = params
    return out


def chosen_in_results() -> dict[str, dict]:
    """model -> {param: value} of the configuration the benchmark's results page marks chosen
    (`adam 0.01`, or for wide_and_deep `ftrl 0.05 + adam 0.003`: the linear part's, then the deep part's)."""
    text = (REPO / "benchmarks" / "tables_defaults_results.md").read_text()
    out = {}
    for model, name in re.findall(r"^## (\w+)\n.*?^\| ([^|]+?) \*\*\(chosen\)\*\*", text, re.M | re.S):
        parts = [p.split() for p in name.split(" + ")]
        params = {"optimizer": parts[-1][0], "learning_rate": float(parts[-1][1])}
        if len(parts) == 2:
            params.update(linear_optimizer=parts[0][0], linear_learning_rate=float(parts[0][1]))
        out[model] = params
    return out


def _built(model: str):
    """The ModelSpec of the canned `model` on a small table, with no optimizer params."""
    frame = pd.DataFrame({"x": [0.1 * i for i in range(40)], "colour": ["red", "green", "blue", "red"] * 10,
                          "y": ["a", "b"] * 20})
    plan = infer_feature_columns(frame, label="y")
    params = {"feature_columns": plan["feature_columns"], "task": "classification", "num_classes": 2}
    return getattr(canned, model)(params)


def _as_documented(optimizer) -> dict:
    return {"optimizer": next(k for k, v in KERAS_NAMES.items() if v == type(optimizer).__name__),
            "learning_rate": pytest.approx(float(optimizer.learning_rate), rel=1e-6)}


def test_the_documented_defaults_are_the_measured_choice_and_the_models_use_them():
    documented = documented_defaults()
    assert set(documented) == {"linear", "dnn", "wide_and_deep"}
    chosen = chosen_in_results()
    assert set(chosen) == set(documented), chosen
    for model, params in documented.items():
        # the benchmark's choice is what the docs say ...
        assert {k: v for k, v in params.items() if k != "hidden_units"} == chosen[model], model
        # ... and what PARAM_DEFAULTS (the flags' defaults, tables.api) say ...
        assert {k: PARAM_DEFAULTS[model][k] for k in params} == params, model
    # ... and what the models built without those params train with
    assert _as_documented(_built("linear").optimizer) == {k: documented["linear"][k]
                                                          for k in ("optimizer", "learning_rate")}
    dnn = _built("dnn")
    assert _as_documented(dnn.optimizer) == {k: documented["dnn"][k] for k in ("optimizer", "learning_rate")}
    widths = [layer.units for layer in dnn.model.layers if layer.name.startswith("dnn_hidden_")]
    assert widths == documented["dnn"]["hidden_units"]
    wide_and_deep = _built("wide_and_deep").optimizer
    assert _as_documented(wide_and_deep.deep) == {k: documented["wide_and_deep"][k]
                                                  for k in ("optimizer", "learning_rate")}
    assert _as_documented(wide_and_deep.wide) == {"optimizer": documented["wide_and_deep"]["linear_optimizer"],
                                                  "learning_rate": documented["wide_and_deep"]["linear_learning_rate"]}
