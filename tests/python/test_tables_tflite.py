"""Tables as TFLite files: a classifier (binary and multi-class) and a regressor with numeric,
bucketized, logical (identity) and string vocabulary columns convert, the file is verified
against the SavedModel on the eval rows and answers what `predict_table` answers on raw
values; whole-number vocabularies convert too (compared with the values, no hash table);
columns TFLite's built-in ops cannot preprocess (hashed, crossed, a whole-number vocabulary
with no out-of-vocabulary bucket) are refused before anything is written, naming the column."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tpuestimator.errors import ConfigError
from tpuestimator.jobs.model_dir_jobs import export_model
from tpuestimator.models.feature_columns import input_name
from tpuestimator.serving import litert
from tpuestimator.serving.exports import open_export
from tpuestimator.tables import predict_table, train_table
from tpuestimator.tables.predict import table_inputs

FIXTURES = Path(os.environ.get("TPUESTIMATOR_FIXTURES", Path(__file__).resolve().parents[1] / "fixtures"))
CARS = FIXTURES / "tables" / "cars.csv"
SPECIES = FIXTURES / "tables" / "species.csv"
QUICK = {"train": {"batch_size": 16, "max_steps": 60, "iterations_per_loop": 30, "save_checkpoints_steps": 60},
         "eval": {"batch_size": 16}, "params": {"hidden_units": [8], "learning_rate": 0.05}}


def _tflite_of(tmp_path, source, label, model, **kwargs):
    result = train_table(source, label=label, model=model, out_dir=tmp_path, config=QUICK, **kwargs)
    lite = export_model(str(result.model_dir), str(tmp_path / "lite"), format="tflite")
    return result, lite


def _interpreter_on(lite, frame, columns) -> dict:
    """The .tflite file's answers for a data frame's rows, fed as `predict_table` feeds the export."""
    raw = table_inputs(frame, columns)
    return litert.run(litert.interpreter(Path(lite.path).read_bytes()),
                      {input_name(k): v for k, v in raw.items()})


@pytest.mark.parametrize("table", ["species", "cars_automatic"])
def test_a_table_classifier_converts_and_answers_as_the_saved_model(tmp_path, table):
    if table == "species":  # three classes; numbers, a bucketized number and a string vocabulary
        source, label, kwargs = SPECIES, "species", {"feature_columns": {"petal_width": {"type": "bucketized",
                                                                                          "buckets": 3}}}
    else:  # two classes (one logit); a logical label, NA under a policy
        source, label, kwargs = CARS, "automatic", {"missing": {"horsepower": "mean"}}
    result, lite = _tflite_of(tmp_path, source, label, "dnn", **kwargs)
    report = lite.tflite
    assert report["passed"] and report["examples"] > 0 and report["max_abs_diff"] <= litert.FLOAT_TOLERANCE, report
    assert report["top1_agreement"] == 1.0
    assert Path(lite.path).is_file() and lite.path.endswith(".tflite")
    frame = pd.read_csv(source)
    columns = open_export(result.export_dir).info.table.feature_columns
    ours = _interpreter_on(lite, frame, columns)
    expected = predict_table(result.export_dir, frame)
    probabilities = np.stack([v for k, v in expected.items() if k.startswith("prob_")], axis=1)
    assert ours["probabilities"].shape == probabilities.shape
    np.testing.assert_allclose(ours["probabilities"], probabilities, atol=1e-5)
    np.testing.assert_array_equal(ours["class_id"], expected["class_id"])


def test_a_table_regressor_converts_and_answers_as_the_saved_model(tmp_path, capsys):
    result, lite = _tflite_of(tmp_path, CARS, "mpg", "wide_and_deep", missing={"horsepower": "mean"})
    report = lite.tflite
    assert report["passed"] and report["max_rel_diff"] <= litert.FLOAT_TOLERANCE, report
    assert report["threshold"] == {"max_rel_diff": litert.FLOAT_TOLERANCE}
    frame = pd.read_csv(CARS)
    frame.loc[0, "origin"] = "mars"  # an unseen category: the out-of-vocabulary bucket in both
    columns = open_export(result.export_dir).info.table.feature_columns
    ours = _interpreter_on(lite, frame, columns)
    expected = predict_table(result.export_dir, frame)["prediction"]
    assert set(ours) == {"prediction"}
    np.testing.assert_allclose(ours["prediction"], expected, rtol=1e-5)
    from tpuestimator.cli import main

    # the CLI prints the regressor's figures (no top-1 agreement for a number)
    assert main(["export", str(result.model_dir), "--out", str(tmp_path / "cli"), "--format", "tflite"]) == 0
    printed = capsys.readouterr().out
    assert "RMS diff / std" in printed and "PASS" in printed, printed


@pytest.mark.parametrize("column, override, kind", [
    ("habitat", {"type": "hashed", "buckets": 8}, "hashed"),
    ("habitat_x_width", {"type": "crossed", "columns": ["habitat", "petal_width"], "buckets": 8}, "crossed"),
])
def test_columns_tflite_cannot_preprocess_are_refused_naming_the_column(tmp_path, column, override, kind):
    columns = {column: override}
    if kind == "crossed":
        columns["petal_width"] = {"type": "bucketized", "buckets": 3}
    # export=False: the refusal reads the model dir, no export (a fifth of a training)
    result = train_table(SPECIES, label="species", model="linear", out_dir=tmp_path, config=QUICK,
                         feature_columns=columns, export=False)
    target = tmp_path / "lite"
    with pytest.raises(ConfigError, match=rf"(?s)tflite.*column '{column}' is {kind}.*TFLite's built-in ops.*"
                                          r"Flex delegate.*tpuestimator export"):
        export_model(str(result.model_dir), str(target), format="tflite")
    assert not target.exists()


def _training_rows(data_dir: Path) -> pd.DataFrame:
    """The training split as written (tf.train.Example records), as a data frame."""
    import tensorflow as tf

    rows = []
    for path in sorted(data_dir.glob("train-*.tfrecord")):
        for record in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
            feature = tf.train.Example.FromString(record).features.feature
            rows.append({"cylinders": feature["cylinders"].int64_list.value[0],
                         "mpg": feature["mpg"].float_list.value[0]})
    return pd.DataFrame(rows)


def test_whole_numbers_are_looked_up_as_whole_numbers_with_integer_lookups_indices():
    """WholeNumberLookup: by hand, and against Keras's IntegerLookup (what it replaced) for 1-3
    out-of-vocabulary buckets, on values in and out of the vocabulary (negative ones too)."""
    import keras
    import tensorflow as tf

    from tpuestimator.models.table_preprocessing import WholeNumberLookup

    values = tf.constant([4, 6, 8, 5, -1, 100], tf.int64)
    # 6 is first: index 1 (after the one OOV bucket, 0), 4 -> 2, 8 -> 3; 5, -1 and 100 -> 0
    np.testing.assert_array_equal(WholeNumberLookup([6, 4, 8], 1)(values).numpy(), [2, 1, 3, 0, 0, 0])
    # two buckets: an unseen value goes to floormod(value, 2): 5 -> 1, -1 -> 1, 100 -> 0
    np.testing.assert_array_equal(WholeNumberLookup([6, 4, 8], 2)(values).numpy(), [3, 2, 4, 1, 1, 0])
    rng = np.random.default_rng(3)
    vocabulary = [int(v) for v in rng.choice(np.arange(-50, 50), size=20, replace=False)]
    many = tf.constant(rng.integers(-60, 60, size=500), tf.int64)
    for buckets in (1, 2, 3):
        reference = keras.layers.IntegerLookup(vocabulary=vocabulary, num_oov_indices=buckets, mask_token=None)
        ours = WholeNumberLookup(vocabulary, buckets)(many)
        assert ours.dtype == tf.int32
        np.testing.assert_array_equal(ours.numpy(), reference(many).numpy())


def test_a_whole_number_vocabulary_converts_and_answers_as_the_saved_model(tmp_path):
    """A regressor on one whole-number vocabulary (cylinders 4, 6, 8): the .tflite file answers
    as the SavedModel and predict_table, an unseen count going to the out-of-vocabulary bucket in
    both; a linear model trained to convergence predicts each count's mean mpg in the training
    rows (least squares on one-hot indices), computed here with pandas."""
    frame = pd.read_csv(CARS)[["cylinders", "mpg"]]
    config = {"train": {"batch_size": 48, "max_steps": 400, "iterations_per_loop": 200, "save_checkpoints_steps": 400},
              "eval": {"batch_size": 16}, "params": {"learning_rate": 0.3}}
    result = train_table(frame, label="mpg", model="linear", out_dir=tmp_path, config=config,
                         feature_columns={"cylinders": {"type": "categorical"}})
    columns = open_export(result.export_dir).info.table.feature_columns
    assert columns["cylinders"]["dtype"] == "int64" and sorted(columns["cylinders"]["vocabulary"]) == [4, 6, 8]
    lite = export_model(str(result.model_dir), str(tmp_path / "lite"), format="tflite")
    assert lite.tflite["passed"] and lite.tflite["max_rel_diff"] <= litert.FLOAT_TOLERANCE, lite.tflite

    rows = pd.DataFrame({"cylinders": [4, 6, 8, 5, 12]})  # 5 and 12 were never seen
    ours = _interpreter_on(lite, rows, columns)["prediction"]
    expected = predict_table(result.export_dir, rows)["prediction"]
    np.testing.assert_allclose(ours, expected, rtol=1e-5)
    assert ours[3] == pytest.approx(ours[4], abs=1e-6)           # one OOV bucket for both
    means = _training_rows(tmp_path / "data").groupby("cylinders")["mpg"].mean()
    np.testing.assert_allclose(ours[:3], means.loc[[4, 6, 8]].to_numpy(), atol=1e-3)


def test_a_whole_number_vocabulary_without_an_oov_bucket_is_refused():
    refusal = litert.table_refusal({"cylinders": {"type": "categorical", "dtype": "int64", "vocabulary": [4, 6],
                                                  "oov_buckets": 0},
                                    "origin": {"type": "categorical", "dtype": "string", "vocabulary": ["us"]}})
    assert refusal and "'cylinders' is int64 categorical without an out-of-vocabulary bucket" in refusal
    assert "IntegerLookup" in refusal and "declare oov_buckets 1" in refusal
    assert litert.table_refusal({"cylinders": {"type": "categorical", "dtype": "int64", "vocabulary": [4, 6]}}) is None
    assert litert.table_refusal({"origin": {"type": "categorical", "dtype": "string", "vocabulary": ["us"]},
                                 "weight": {"type": "numeric"}, "automatic": {"type": "identity"},
                                 "w": {"type": "bucketized"}}) is None
