"""Tables: a data frame / CSV in, feature columns inferred from the training split, canned
models (linear, dnn, wide_and_deep) as classifiers and regressors, exports that take raw
values, offline evaluation and batch prediction of a regressor, and bad input refused before
anything is written. Fixtures: tests/fixtures/tables (make_fixtures.py)."""
from __future__ import annotations

import json
import os
import runpy
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


def test_one_hot_up_to_16_indices_an_embedding_above_and_over_1000_strings_hashed():
    """README: "one-hot up to 16 indices (15 values and the out-of-vocabulary bucket), an
    embedding above; more than 1000 distinct strings are hashed" (the training rows' distinct
    values, counted here)."""
    def column(distinct):
        frame = pd.DataFrame({"c": [f"v{i % distinct}" for i in range(2 * distinct + 10)],
                              "y": np.arange(2 * distinct + 10, dtype=float)})
        # an explicit eval table: every row of `frame` is a training row, so the counts are exact
        return infer_feature_columns(frame, label="y", split=frame.head(5))["feature_columns"]["c"]
    assert column(15)["encoding"] == "one_hot" and len(column(15)["vocabulary"]) == 15
    assert column(16)["encoding"] == "embedding" and column(16)["type"] == "categorical"
    assert column(1000)["type"] == "categorical" and len(column(1000)["vocabulary"]) == 1000
    assert column(1001)["type"] == "hashed"


def test_the_held_out_rows_are_stratified_by_class():
    """README: "20% held out for evaluation, stratified by class": each class keeps its share
    (counted here by hand), also for a class whose rows all come last in the file."""
    frame = pd.read_csv(SPECIES)
    skewed = pd.concat([frame[frame.species != "virginica"], frame[frame.species == "virginica"].head(10)])
    plan = infer_feature_columns(skewed, label="species")
    held_out = skewed.iloc[plan["eval"]].species.value_counts().to_dict()
    expected = {c: int(round(0.2 * n)) for c, n in skewed.species.value_counts().items()}
    assert held_out == expected
    assert sorted(np.concatenate([plan["train"], plan["eval"]]).tolist()) == list(range(len(skewed)))
    regression = infer_feature_columns(CARS, label="mpg", missing="mean")
    assert len(regression["eval"]) == round(0.2 * len(pd.read_csv(CARS)))


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
    # `cli.main` in this process with the argv a shell would pass: its exit code and printed
    # lines are the command's (a TensorFlow start saved; the CLI as a fresh process is
    # test_main_command.py's)
    from tpuestimator.cli import main

    capsys.readouterr()
    code = main(["data", "write", str(CARS), str(tmp_path / "d"), "--label", "mpg", "--missing", "horsepower=mean"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "regression table" in out.out and "origin: categorical" in out.out
    manifest = json.loads((tmp_path / "d" / "manifest.json").read_text())
    assert manifest["task"] == "regression" and manifest["feature_columns"]["horsepower"]["missing"] == "mean"
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
    # The metrics are the eval rows' own, in the label's units: recomputed here by hand from
    # the predictions of the held-out rows and their true mpg.
    truth, predicted = _eval_rows_truth_and_predictions(result)
    error = truth - predicted
    assert result.metrics["rmse"] == pytest.approx(np.sqrt(np.mean(error ** 2)), rel=1e-4)
    assert result.metrics["mae"] == pytest.approx(np.mean(np.abs(error)), rel=1e-4)
    assert result.metrics["r2"] == pytest.approx(1 - np.sum(error ** 2) / np.sum((truth - truth.mean()) ** 2),
                                                 rel=1e-3, abs=1e-3)
    # ... and the model learned mpg: far better than the training mean, within reach of least
    # squares on the same training rows (0.70 mpg; the dnn's 400 steps reach 1.95)
    baseline = np.sqrt(np.mean((truth - pd.read_csv(CARS).mpg.iloc[_train_rows()].mean()) ** 2))
    assert result.metrics["rmse"] < 0.5 * baseline
    assert result.metrics["rmse"] < 4 * _least_squares_eval_rmse()


def _train_rows():
    return infer_feature_columns(pd.read_csv(CARS), label="mpg", missing="mean")["train"]


def _eval_rows_truth_and_predictions(result, path=CARS, label="mpg"):
    frame = pd.read_csv(path)
    eval_rows = infer_feature_columns(frame, label=label, missing="mean")["eval"]
    held_out = frame.iloc[eval_rows]
    predicted = np.asarray(predict_table(result.export_dir, held_out.drop(columns=label))["prediction"])
    return held_out[label].to_numpy(float), predicted


def _least_squares_eval_rmse() -> float:
    """numpy's least squares of mpg on the numbers and one-hot origin (horsepower's NA: the
    training mean), fitted on the training rows, its RMSE on the eval rows."""
    frame = pd.read_csv(CARS)
    plan = infer_feature_columns(frame, label="mpg", missing="mean")
    train = frame.iloc[plan["train"]]
    filled = frame.assign(horsepower=frame.horsepower.fillna(train.horsepower.mean()))
    design = np.column_stack([np.ones(len(frame)), filled[["weight", "horsepower", "cylinders"]].to_numpy(float),
                              filled.automatic.astype(float)] + [(filled.origin == o).to_numpy(float)
                                                                 for o in ("eu", "jp")])
    coef, *_ = np.linalg.lstsq(design[plan["train"]], frame.mpg.to_numpy()[plan["train"]], rcond=None)
    residual = frame.mpg.to_numpy()[plan["eval"]] - design[plan["eval"]] @ coef
    return float(np.sqrt(np.mean(residual ** 2)))


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
    preds = np.asarray(predict_table(result.export_dir, frame)["prediction"])
    assert preds.shape == (4,) and np.isfinite(preds).all()
    original = pd.read_csv(CARS).head(4).drop(columns="mpg")
    # The NA takes the training rows' mean horsepower (the manifest's), computed here by hand.
    plan = infer_feature_columns(pd.read_csv(CARS), label="mpg", missing={"horsepower": "mean"})
    train_mean = pd.read_csv(CARS).iloc[plan["train"]].horsepower.mean()
    # one call (one load of the export) for the rows compared below: the 4 rows untouched, row 1
    # at the training mean, row 0 with each known origin (each row is predicted on its own)
    probes = pd.concat([original, original.iloc[[1]].assign(horsepower=train_mean),
                        original.iloc[[0, 0, 0]].assign(origin=["eu", "jp", "us"])], ignore_index=True)
    probed = np.asarray(predict_table(result.export_dir, probes)["prediction"])
    untouched, at_mean, known = probed[:4], probed[4], probed[5:]
    np.testing.assert_allclose(preds[2:], untouched[2:], rtol=1e-6)   # each row on its own
    assert preds[1] == pytest.approx(float(at_mean), rel=1e-5)
    # "mars" is the out-of-vocabulary bucket: its own bucket, not one of the known origins.
    assert all(abs(preds[0] - k) > 1e-4 for k in known), (preds[0], known)
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
    truth, predicted = _eval_rows_truth_and_predictions(result)
    assert report["rmse"] == pytest.approx(np.sqrt(np.mean((truth - predicted) ** 2)), rel=1e-4)
    from PIL import Image

    with Image.open(Path(report["run_dir"]) / "residuals.png") as plot:
        assert plot.format == "PNG" and plot.size == (480, 480)
    written = predict_to_file(str(result.export_dir), [str(out / "data" / "eval-00000-of-00001.tfrecord")],
                              tmp_path / "p.csv")
    table = pd.read_csv(written["path"])
    assert "prediction" in table.columns and len(table) == written["rows"] == 12
    # each eval record's number, as predict_table gives it for the same rows of the CSV
    np.testing.assert_allclose(table["prediction"].to_numpy(), predicted, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("model", ["linear", "dnn", "wide_and_deep"])
def test_canned_classifiers_train_and_predict_classes(tmp_path, model):
    result = train_table(SPECIES, label="species", model=model, out_dir=tmp_path,
                         feature_columns={"habitat": {"encoding": "embedding", "embedding_dim": 2}}, config=QUICK)
    assert result.metrics["accuracy"] >= 0.8
    frame = pd.read_csv(SPECIES)
    held_out = frame.iloc[infer_feature_columns(frame, label="species")["eval"]]
    preds = predict_table(result.export_dir, held_out.drop(columns="species"))
    classes = ["setosa", "versicolor", "virginica"]
    assert set(preds) >= {"class", "class_id", *(f"prob_{c}" for c in classes)}
    probs = np.column_stack([np.asarray(preds[f"prob_{c}"]) for c in classes])
    class_id = np.asarray(preds["class_id"])
    np.testing.assert_allclose(probs.sum(1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(class_id, probs.argmax(1))                       # the most probable class
    assert list(preds["class"]) == [classes[i] for i in class_id]                  # its name
    # accuracy, recomputed by hand from the predicted classes and the truth, is the recorded one
    accuracy = np.mean(np.asarray(preds["class"]) == held_out.species.to_numpy())
    assert result.metrics["accuracy"] == pytest.approx(accuracy, abs=1e-6)


@pytest.mark.parametrize("model", ["linear", "wide_and_deep"])
def test_canned_regressors_with_huber_loss_and_crosses(tmp_path, model):
    result = train_table(CARS, label="mpg", model=model, out_dir=tmp_path, missing="mean", feature_columns={
        "cylinders": {"type": "categorical"},
        "cyl_x_origin": {"type": "crossed", "columns": ["cylinders", "origin"], "buckets": 16}},
        config={**QUICK, "params": {**QUICK["params"], "loss": "huber", "batch_norm": True, "dropout": 0.1}})
    assert np.isfinite(result.metrics["rmse"]) and "r2" in result.metrics
    # The loss is Huber's (delta 1, in mpg) of the eval rows divided by the training label's
    # variance, by hand from the predictions; mse's would be about twice it for small errors.
    truth, predicted = _eval_rows_truth_and_predictions(result)
    std = json.loads((tmp_path / "data" / "manifest.json").read_text())["label_stats"]["std"]
    absolute = np.abs(truth - predicted)
    quadratic = np.minimum(absolute, 1.0)
    huber = np.mean(0.5 * quadratic ** 2 + (absolute - quadratic)) / std ** 2
    assert result.metrics["loss"] == pytest.approx(huber, rel=1e-3)
    assert result.metrics["rmse"] == pytest.approx(np.sqrt(np.mean((truth - predicted) ** 2)), rel=1e-4)
    # the crossed column is an input of the model (through its HashedCrossing), not dropped
    manifest = json.loads((tmp_path / "data" / "manifest.json").read_text())
    assert manifest["feature_columns"]["cyl_x_origin"]["columns"] == ["cylinders", "origin"]


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
    scope: dict = {}
    exec(block, scope)  # noqa: S102 (the page's lines, as written)
    assert (tmp_path / "models" / "houses" / "data" / "manifest.json").is_file()
    # the model learned the page's prices: its RMSE beats predicting their mean (their std, numpy)
    prices = scope["houses"]["price"].to_numpy(dtype=float)
    assert scope["result"].metrics["rmse"] < 0.5 * np.std(prices), (scope["result"].metrics, np.std(prices))


def test_examples_python_tables_runs(tmp_path, monkeypatch, capsys):
    # run as `python examples/python/tables_pandas.py OUT_DIR` runs it, in this process (a
    # TensorFlow start saved): its argv, its own module namespace, its printed lines. Every line
    # as written but 20 steps, not 600: nothing here asserts what the model learned
    # (test_docs_tables_pandas_example_runs and the regressor tests do)
    source = (REPO / "examples" / "python" / "tables_pandas.py").read_text()
    assert source.count('"max_steps": 600') == 1
    script = tmp_path / "tables_pandas.py"
    script.write_text(source.replace('"max_steps": 600', '"max_steps": 20'))
    monkeypatch.setattr(sys, "argv", [str(script), str(tmp_path / "out")])
    runpy.run_path(sys.argv[0], run_name="__main__")
    assert "'rmse'" in capsys.readouterr().out
    assert (tmp_path / "out" / "data" / "manifest.json").is_file()


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
