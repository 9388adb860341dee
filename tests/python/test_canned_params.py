"""The built-in models' typed params (`tpuestimator.models.params`, issue 33): the canned models
parse their params dict once, checked, with their documented defaults; the job merges the data's
facts into the plain dict every model function receives."""
from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from tpuestimator.errors import ConfigError, ModelFnError
from tpuestimator.models import canned
from tpuestimator.models.params import (
    PARAM_DEFAULTS,
    DataParams,
    DNNParams,
    LinearParams,
    WideAndDeepParams,
    with_data,
)
from tpuestimator.tables import infer_feature_columns


@pytest.fixture(scope="module")
def table_params() -> dict:
    frame = pd.DataFrame({"x": [0.1 * i for i in range(40)], "colour": ["red", "green", "blue", "red"] * 10,
                          "y": ["a", "b"] * 20})
    plan = infer_feature_columns(frame, label="y")
    return {"feature_columns": plan["feature_columns"], "task": "classification", "num_classes": 2,
            "vocabulary": ["a", "b"]}


@pytest.mark.parametrize(("model", "bad", "field"), [
    ("dnn", {"dropout": 1.5}, "params.dropout"),
    ("dnn", {"hidden_units": [64, 0]}, "params.hidden_units"),
    ("dnn", {"learning_rate": 0}, "params.learning_rate"),
    ("linear", {"optimizer": "nadam"}, "params.optimizer"),
    ("linear", {"l2_regularization": -0.1}, "params.l2_regularization"),
    ("wide_and_deep", {"linear_learning_rate": -1.0}, "params.linear_learning_rate"),
    ("wide_and_deep", {"task": "ranking"}, "params.task"),
    ("dnn", {"task": "regression", "loss": "mae"}, "params.loss"),
    ("dnn", {"task": "regression", "label_stats": {"mean": 1.0, "std": 0.0}}, "params.label_stats"),
])
def test_a_bad_canned_param_is_refused_naming_the_field(table_params, model, bad, field):
    with pytest.raises(ConfigError) as caught:
        getattr(canned, model)({**table_params, **bad})
    assert caught.value.field == field
    assert f"{field}={bad[field.removeprefix('params.')]!r}" in str(caught.value)  # the value as given


def test_a_canned_model_without_a_table_says_how_to_make_one():
    with pytest.raises(ModelFnError, match="tpuestimator data write"):
        canned.dnn({"task": "classification", "num_classes": 2})


def test_the_typed_params_are_parsed_once_frozen_with_the_documented_defaults(table_params):
    p = WideAndDeepParams.from_params({**table_params, "hidden_units": [8], "dropout": None, "unrelated": 1})
    assert (p.hidden_units, p.dropout, p.batch_norm) == ((8,), 0.0, False)
    assert (p.optimizer, p.learning_rate, p.linear_optimizer, p.linear_learning_rate) == ("adam", 0.001, "ftrl", 0.05)
    assert (p.task, p.num_classes, p.vocabulary, p.class_names) == ("classification", 2, ("a", "b"), ["a", "b"])
    assert sorted(p.feature_columns) == ["colour", "x"] and p.feature_columns["x"].type == "numeric"
    assert p.units() == 1  # binary: one logit
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.dropout = 0.5
    with pytest.raises(TypeError):
        LinearParams(table_params["feature_columns"])  # keyword-only
    # PARAM_DEFAULTS (the flags' defaults) are the dataclasses' own, as plain params
    assert PARAM_DEFAULTS["dnn"] == {"optimizer": "adam", "learning_rate": 0.001, "hidden_units": [64, 32],
                                     "dropout": 0.0, "batch_norm": False}
    assert PARAM_DEFAULTS["linear"] == {"optimizer": "ftrl", "learning_rate": 0.2, "l2_regularization": 0.0}
    assert set(PARAM_DEFAULTS["wide_and_deep"]) == set(PARAM_DEFAULTS["dnn"]) | {
        "linear_optimizer", "linear_learning_rate", "l2_regularization"}
    regression = DNNParams.from_params({**table_params, "task": "regression", "label_stats": {"mean": 65, "std": 3.5}})
    assert (regression.label_stats.mean, regression.label_stats.std, regression.units()) == (65.0, 3.5, 1)


def test_the_dnn_is_built_as_its_typed_params_say(table_params):
    spec = canned.dnn({**table_params, "num_classes": 3, "vocabulary": ["a", "b", "c"], "hidden_units": [5, 4],
                       "batch_norm": True, "dropout": 0.25})
    layers = {layer.name: layer for layer in spec.model.layers}
    assert [layers[f"dnn_hidden_{i}"].units for i in (0, 1)] == [5, 4]
    assert "dnn_batch_norm_1" in layers and layers["dnn_dropout_0"].rate == 0.25
    assert spec.model.output.shape[-1] == 3 and spec.class_names == ["a", "b", "c"]


def test_data_params_read_what_a_users_model_may_hold_without_judging_it():
    data = DataParams.from_params({"task": "multilabel", "vocabulary": "classes.txt", "num_classes": 7})
    assert (data.task, data.vocabulary, data.num_classes) == ("multilabel", None, 7)
    with pytest.raises(ModelFnError, match="num_classes"):
        DataParams.from_params({"num_classes": 0}).classes()


def test_the_data_facts_join_the_plain_params_every_model_function_receives(table_params):
    from tpuestimator.models.column_spec import parse_columns

    columns = parse_columns(table_params["feature_columns"])
    params = with_data({"learning_rate": 0.1}, task="classification", num_classes=2, vocabulary=["a", "b"],
                       feature_columns=columns)
    assert params == {"learning_rate": 0.1, "task": "classification", "num_classes": 2, "vocabulary": ["a", "b"],
                      "feature_columns": table_params["feature_columns"]}
    # the params' own values win; a regression gets the label scale and no classes
    assert with_data({"num_classes": 2, "vocabulary": ["n", "y"]}, task=None, num_classes=2, vocabulary=None) == \
        {"num_classes": 2, "vocabulary": ["n", "y"]}
    assert with_data({}, task="regression", num_classes=3, vocabulary=None, label_stats={"mean": 1.0, "std": 2.0}) == \
        {"task": "regression", "label_stats": {"mean": 1.0, "std": 2.0}}
    with pytest.raises(ConfigError) as caught:
        with_data({"task": "classification"}, task="regression", num_classes=None, vocabulary=None)
    assert caught.value.field == "params.task" and "a number" in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        with_data({"num_classes": 3}, task=None, num_classes=2, vocabulary=["a", "b"])
    assert caught.value.field == "params.num_classes" and "2 classes" in str(caught.value)


def test_a_jobs_params_hold_the_datas_vocabulary_for_a_users_model_function(tmp_path):
    from tpuestimator.config import load_config
    from tpuestimator.jobs.from_config import model_params

    cfg = load_config({"model": "mymodels:model_fn", "params": {"units": 4},
                       "data": {"format": "features", "train": str(tmp_path / "train-*"),
                                "features": {"x": {"shape": [2], "dtype": "float32"}}, "label": "y",
                                "vocabulary": ["cat", "dog", "bird"]}})
    params = model_params(cfg)
    assert params == {"units": 4, "vocabulary": ["cat", "dog", "bird"], "num_classes": 3}
    assert type(params) is dict  # the user's model function gets a plain dict
