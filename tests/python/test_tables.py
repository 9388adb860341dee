"""Tables: a data frame / CSV in, feature columns inferred from the training split, canned
models (linear, dnn, wide_and_deep) as classifiers and regressors, exports that take raw
values, offline evaluation and batch prediction of a regressor, and bad input refused before
anything is written. Fixtures: tests/fixtures/tables (make_fixtures.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from tpuestimator.errors import ConfigError, DataError
from tpuestimator.tables import infer_feature_columns, predict_table, train_table, write_table

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
CARS = FIXTURES / "tables" / "cars.csv"
SPECIES = FIXTURES / "tables" / "species.csv"
QUICK = {"train": {"batch_size": 16, "max_steps": 120, "iterations_per_loop": 40, "save_checkpoints_steps": 120},
         "eval": {"batch_size": 16}, "params": {"learning_rate": 0.05, "hidden_units": [16]}}


def test_columns_are_inferred_from_the_training_split_only():
    frame = pd.read_csv(CARS)
    plan = infer_feature_columns(frame, label="mpg", missing={"horsepower": "mean"})
    columns = plan["feature_columns"]
    assert plan["task"] == "regression"
    assert {k: v["type"] for k, v in columns.items()} == {
        "weight": "numeric", "horsepower": "numeric", "cylinders": "numeric", "origin": "categorical",
        "automatic": "identity"}
    train = frame.iloc[plan["train"]]
    assert columns["weight"]["mean"] == pytest.approx(train.weight.mean())
    assert columns["weight"]["mean"] != pytest.approx(frame.weight.mean(), abs=1e-9)
    assert columns["horsepower"]["mean"] == pytest.approx(train.horsepower.mean())  # NA left out
    assert columns["horsepower"]["missing"] == "mean"
    assert sorted(columns["origin"]["vocabulary"]) == ["eu", "jp", "us"]
    assert columns["origin"]["encoding"] == "one_hot"
    assert len(plan["train"]) + len(plan["eval"]) == len(frame)


def test_overrides_change_types_and_add_crosses():
    plan = infer_feature_columns(CARS, label="mpg", missing="mean", feature_columns={
        "cylinders": {"type": "categorical"}, "weight": {"type": "bucketized", "buckets": 3},
        "origin": {"encoding": "embedding", "embedding_dim": 3},
        "cyl_x_origin": {"type": "crossed", "columns": ["cylinders", "origin"], "buckets": 16}})
    columns = plan["feature_columns"]
    assert columns["cylinders"]["dtype"] == "int64" and sorted(columns["cylinders"]["vocabulary"]) == [4, 6, 8]
    assert len(columns["weight"]["boundaries"]) == 2
    assert columns["origin"]["embedding_dim"] == 3
    assert columns["cyl_x_origin"]["type"] == "crossed"
    with pytest.raises(ConfigError, match="encoding"):
        infer_feature_columns(CARS, label="mpg", missing="mean", feature_columns={"origin": {"encoding": "dense"}})


@pytest.mark.parametrize("case, message", [
    ({"label": "price"}, "label column 'price' not found"),
    ({"label": "origin", "task": "regression"}, "not a number; a regression label must be numeric"),
    ({"label": "mpg"}, r"'horsepower' \(3 missing, rows"),
])
def test_bad_tables_are_refused_before_anything_is_written(tmp_path, case, message):
    out = tmp_path / "data"
    with pytest.raises(DataError, match=message):
        write_table(CARS, out, **case)
    assert not out.exists() and os.listdir(tmp_path) == []


def test_one_class_and_empty_columns_are_refused(tmp_path):
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "empty": [np.nan] * 4, "y": ["a"] * 4})
    with pytest.raises(DataError, match="holds one class only"):
        write_table(frame, tmp_path / "a", label="y")
    frame["y"] = ["a", "b", "a", "b"]
    with pytest.raises(DataError, match="column 'empty' is empty"):
        write_table(frame, tmp_path / "b", label="y")
    assert os.listdir(tmp_path) == []


def test_cli_writes_a_table(tmp_path, capsys):
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    out = subprocess.run([sys.executable, "-m", "tpuestimator", "data", "write", str(CARS), str(tmp_path / "d"),
                          "--label", "mpg", "--missing", "horsepower=mean"], capture_output=True, text=True,
                         env=env, check=False)
    assert out.returncode == 0, out.stderr
    assert "regression table" in out.stdout and "origin: categorical" in out.stdout
    manifest = json.loads((tmp_path / "d" / "manifest.json").read_text())
    assert manifest["task"] == "regression" and manifest["feature_columns"]["horsepower"]["missing"] == "mean"
    # the refusal in this process (the command ran for real above; a TensorFlow start saved)
    from tpuestimator.cli import main

    code = main(["data", "write", str(CARS), str(tmp_path / "e"), "--label", "mpg"])
    err = capsys.readouterr().err
    assert code != 0 and "horsepower" in err and "3 missing" in err
    assert not (tmp_path / "e").exists()


@pytest.fixture(scope="module")
def regressor(tmp_path_factory):
    out = tmp_path_factory.mktemp("cars")
    result = train_table(pd.read_csv(CARS), label="mpg", model="dnn", out_dir=out, missing={"horsepower": "mean"},
                         config={**QUICK, "train": {**QUICK["train"], "max_steps": 400}})
    return out, result


def test_regressor_trains_evaluates_and_records_rmse(regressor):
    out, result = regressor
    assert {"loss", "mae", "rmse", "r2"} <= set(result.metrics)
    # mse loss of the standardized label (the manifest's training std); rmse in the label's units
    std = json.loads((out / "data" / "manifest.json").read_text())["label_stats"]["std"]
    assert result.metrics["rmse"] == pytest.approx(std * np.sqrt(result.metrics["loss"]), rel=1e-4)
    assert result.metrics["r2"] > 0.5
    evaluation = json.loads((Path(result.run_dir) / "tfruns.d" / "evaluation.json").read_text())
    assert {"rmse", "mae", "r2"} <= set(evaluation)


def test_regressor_export_takes_raw_values(regressor):
    out, result = regressor
    from tpuestimator.serving.exports import open_export

    export = open_export(str(result.export_dir))
    specs = export.input_specs("features")
    assert specs["origin"].dtype == tf.string and specs["weight"].dtype == tf.float32
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(out / "data" / "eval-00000-of-00001.tfrecord"))]
    by_example = export.run("serving_default", records)["prediction"]
    frame = pd.read_csv(CARS)
    eval_rows = infer_feature_columns(frame, label="mpg", missing={"horsepower": "mean"})["eval"]
    by_frame = predict_table(result.export_dir, frame.iloc[eval_rows])["prediction"]
    np.testing.assert_allclose(by_example, by_frame, rtol=1e-5, atol=1e-5)


def test_predict_table_unseen_category_missing_value_and_missing_column(regressor):
    out, result = regressor
    frame = pd.read_csv(CARS).head(4).drop(columns="mpg")
    frame.loc[0, "origin"] = "mars"   # never seen: the OOV bucket
    frame.loc[1, "horsepower"] = np.nan  # the column's policy: the training mean
    preds = predict_table(result.export_dir, frame)
    assert preds["prediction"].shape == (4,) and np.isfinite(preds["prediction"]).all()
    with pytest.raises(DataError, match="column 'weight' is missing"):
        predict_table(result.export_dir, frame.drop(columns="weight"))
    frame.loc[2, "weight"] = np.nan
    with pytest.raises(DataError, match=r"'weight' \(1 missing, row 3\)"):
        predict_table(result.export_dir, frame)


def test_offline_evaluation_and_batch_prediction_of_a_regressor(regressor, tmp_path):
    out, result = regressor
    from tpuestimator.jobs.export_jobs import evaluate_export, predict_to_file

    report = evaluate_export(str(result.export_dir), runs_dir=str(tmp_path / "runs"))
    assert report["rmse"] == pytest.approx(result.metrics["rmse"], rel=1e-3)
    assert report["r2"] == pytest.approx(result.metrics["r2"], rel=1e-3, abs=1e-3)
    assert (Path(report["run_dir"]) / "artifacts" / "residuals.png").is_file() or \
        any(p.name == "residuals.png" for p in Path(report["run_dir"]).rglob("*.png"))
    written = predict_to_file(str(result.export_dir), [str(out / "data" / "eval-00000-of-00001.tfrecord")],
                              tmp_path / "p.csv")
    table = pd.read_csv(written["path"])
    assert "prediction" in table.columns and len(table) == written["rows"] == 12


@pytest.mark.parametrize("model", ["linear", "dnn", "wide_and_deep"])
def test_canned_classifiers_train_and_predict_classes(tmp_path, model):
    result = train_table(SPECIES, label="species", model=model, out_dir=tmp_path,
                         feature_columns={"habitat": {"encoding": "embedding", "embedding_dim": 2}}, config=QUICK)
    assert result.metrics["accuracy"] >= 0.8
    preds = predict_table(result.export_dir, pd.read_csv(SPECIES).head(5))
    assert set(preds) >= {"class", "class_id", "prob_setosa", "prob_versicolor", "prob_virginica"}
    assert set(preds["class"]) <= {"setosa", "versicolor", "virginica"}


@pytest.mark.parametrize("model", ["linear", "wide_and_deep"])
def test_canned_regressors_with_huber_loss_and_crosses(tmp_path, model):
    result = train_table(CARS, label="mpg", model=model, out_dir=tmp_path, missing="mean", feature_columns={
        "cylinders": {"type": "categorical"},
        "cyl_x_origin": {"type": "crossed", "columns": ["cylinders", "origin"], "buckets": 16}},
        config={**QUICK, "params": {**QUICK["params"], "loss": "huber", "batch_norm": True, "dropout": 0.1}})
    assert np.isfinite(result.metrics["rmse"]) and "r2" in result.metrics


@pytest.mark.parametrize("model", ["linear", "dnn", "wide_and_deep"])
def test_tpu_check_passes_for_every_canned_model(tmp_path, model):
    from tpuestimator.jobs.check import check_config
    from tpuestimator.tables.api import table_config

    manifest = write_table(CARS, tmp_path / "d", label="mpg", missing="mean",
                           feature_columns={"origin": {"encoding": "embedding"}})
    cfg = table_config(manifest["path"], model=model, config={"train": {"batch_size": 16}, "eval": {"batch_size": 16},
                                                             "predict": {"batch_size": 16}})
    report = check_config(cfg)
    assert report.ok, [r for r in report.failures()]


def _docs_tables_blocks(language: str) -> list[str]:
    section = (REPO / "docs" / "tables.md").read_text()
    return [block.split("```", 1)[0] for block in section.split(f"```{language}\n")[1:]]


def test_docs_tables_pandas_example_runs(tmp_path, monkeypatch):
    (block,) = _docs_tables_blocks("python")
    monkeypatch.chdir(tmp_path)
    exec(block, {})  # noqa: S102 (the page's lines, as written)
    assert (tmp_path / "models" / "houses" / "data" / "manifest.json").is_file()


def test_examples_python_tables_runs(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    out = subprocess.run([sys.executable, str(REPO / "examples" / "python" / "tables_pandas.py"), str(tmp_path)],
                         capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "'rmse'" in out.stdout


@pytest.mark.parametrize("model", ["linear", "dnn", "wide_and_deep"])
def test_flags_name_the_canned_models_params(model):
    from tpuestimator.tables.api import table_config, table_flag_overrides

    cfg = table_config("unwritten/manifest.json", model=model)
    sets = table_flag_overrides(cfg, model, ["train.max_steps=20"],
                                {"learning_rate": 0.2, "max_steps": 7, "params.hidden_units": [8]})
    assert sets == ["params.learning_rate=0.2", "train.max_steps=7", "params.hidden_units=[8]"]


def test_unknown_flag_is_refused_before_the_table_is_written(tmp_path):
    with pytest.raises(ConfigError, match=r"learning_rat=0.1.*params\.learning_rate"):
        train_table(pd.read_csv(CARS), label="mpg", out_dir=tmp_path / "out", flags={"learning_rat": 0.1})
    assert not (tmp_path / "out").exists()
