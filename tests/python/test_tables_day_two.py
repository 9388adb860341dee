"""Tables as a new user meets them (issue 34): keyword column names, wide_and_deep on an
all-numeric table, the task from the label, `split` checked, a changed table never continued
silently, date columns. Trainings are a few steps on a few rows."""
from __future__ import annotations

import datetime
import json
import keyword
import logging
import os

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from tpuestimator.errors import ConfigError, DataError
from tpuestimator.jobs.modeldir import ModelDirConflictError
from tpuestimator.tables import predict_table, train_table, write_table
from tpuestimator.tables.frames import task_from_label

TINY = {"train": {"batch_size": 8, "max_steps": 10, "iterations_per_loop": 10, "save_checkpoints_steps": 10},
        "eval": {"batch_size": 8}, "params": {"hidden_units": [4]}}


def test_every_python_keyword_as_a_column_name_trains_exports_and_serves(tmp_path):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({k: rng.normal(size=24) for k in keyword.kwlist})
    frame["y"] = frame["class"] * 2.0 - frame["from"] + rng.normal(scale=0.1, size=24)
    result = train_table(frame, label="y", model="linear", out_dir=tmp_path, config=TINY)
    from tpuestimator.serving.exports import open_export

    export = open_export(str(result.export_dir))
    names = set(export.input_specs("features"))
    # each input a valid identifier that no Python keyword is: `class` -> `class_`, `True` -> `true`
    assert len(names) == len(keyword.kwlist)
    assert all(n.isidentifier() and not keyword.iskeyword(n) for n in names), names
    assert {"class_", "from_", "true", "none", "lambda_"} <= names
    raw = {k: frame[k].to_numpy(np.float32)[:5] for k in keyword.kwlist}  # the columns' own names
    served = export.run("features", raw)["prediction"]
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(tmp_path / "data" / "train-00000-of-00001.tfrecord"))]
    assert served.shape == (5,) and np.isfinite(served).all()
    np.testing.assert_allclose(served, predict_table(result.export_dir, frame.head(5))["prediction"], rtol=1e-5)
    assert np.isfinite(export.run("serving_default", records[:3])["prediction"]).all()


def test_two_column_names_mapping_to_one_input_are_refused_naming_both(tmp_path):
    frame = pd.DataFrame({"Class": [1.0, 2.0, 3.0, 4.0], "class_": [0.0, 1.0, 0.0, 1.0], "y": [1.0, 2.0, 3.0, 4.5]})
    with pytest.raises(DataError, match=r"columns 'Class' and 'class_' both become the model input 'class_'"):
        write_table(frame, tmp_path / "d", label="y")
    assert os.listdir(tmp_path) == []


def test_wide_and_deep_on_an_all_numeric_table_puts_every_column_in_both_parts(tmp_path, caplog):
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"num_a_w": rng.normal(size=40), "num_b_w": rng.normal(size=40)})
    frame["y"] = frame.num_a_w - frame.num_b_w
    with caplog.at_level(logging.INFO, logger="tpuestimator"):
        result = train_table(frame, label="y", model="wide_and_deep", out_dir=tmp_path, config=TINY)
    told = [r.getMessage() for r in caplog.records if "no column is in the wide part" in r.getMessage()]
    assert len(told) == 1, told
    reader = tf.train.load_checkpoint(str(tmp_path / "model"))
    shapes = reader.get_variable_to_shape_map()
    # the wide part's optimizer (Ftrl) keeps slots of the linear part's kernel: 2 columns x 1 output
    wide = [shape for k, shape in shapes.items() if k.startswith("optimizer/wide/_variables/")]
    assert [2, 1] in wide, shapes
    assert np.isfinite(predict_table(result.export_dir, frame.head(3))["prediction"]).all()


def test_wide_and_deep_with_every_column_wide_puts_every_column_in_both_parts(tmp_path, caplog):
    frame = pd.DataFrame({"colour_dw": ["red", "blue", "green", "red"] * 6, "y": [1.0, 2.0, 3.0, 1.5] * 6})
    with caplog.at_level(logging.INFO, logger="tpuestimator"):
        result = train_table(frame, label="y", model="wide_and_deep", out_dir=tmp_path, config=TINY,
                             feature_columns={"colour_dw": {"part": "wide"}})
    assert sum("no column is in the deep part" in r.getMessage() for r in caplog.records) == 1
    assert np.isfinite(predict_table(result.export_dir, frame.head(3))["prediction"]).all()


@pytest.mark.parametrize("values, task", [
    (np.arange(116) % 52, "regression"),            # airquality's Ozone: 52 distinct whole numbers
    (np.repeat([0, 1, 2], 50), "classification"),   # iris's species as codes
    (np.arange(12) % 10, "regression"),             # 10 distinct in 12 rows: more than half as many
    (np.arange(40) % 20, "classification"),         # 20 distinct (the most), each twice
    (np.arange(63) % 21, "regression"),             # 21 distinct: more than 20
    (np.array([0, 1, 1]), "classification"),        # two values: always classes
    (np.array([4.0, 6.0, 8.0] * 10), "regression"),  # whole numbers stored as floats: numbers
    (np.array([0.0, 1.0] * 10), "classification"),
    (np.array([0.5, 1.0] * 10), "regression"),
    (np.array(["a", "b"] * 3, dtype=object), "classification"),
])
def test_the_task_from_the_label_follows_the_stated_rule(values, task):
    assert task_from_label(values, None)[0] == task


def test_the_chosen_task_is_told_with_the_reason_and_the_other_choice(tmp_path, caplog):
    frame = pd.DataFrame({"x": np.arange(116, dtype=float), "ozone": (np.arange(116) * 7) % 52 + 1})
    with caplog.at_level(logging.INFO, logger="tpuestimator.tables.frames"):
        manifest = write_table(frame, tmp_path / "d", label="ozone")
    lines = [r.getMessage() for r in caplog.records if r.name == "tpuestimator.tables.frames"]
    assert lines == ["label 'ozone' holds integers with 52 distinct values, more than 20: training a regressor "
                     "(regression); pass task=\"classification\" for a classifier."]
    assert manifest["task"] == "regression"
    # the user's choice wins, and nothing is told
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tpuestimator.tables.frames"):
        manifest = write_table(frame, tmp_path / "c", label="ozone", task="classification")
    assert manifest["task"] == "classification" and len(manifest["vocabulary"]) == 52
    assert not [r for r in caplog.records if r.name == "tpuestimator.tables.frames"]


@pytest.mark.parametrize("split", [0, 0.0, 1, 1.5, -0.2, True, None, [0.2]])
def test_a_split_outside_zero_one_is_refused_before_anything_is_written(tmp_path, split):
    frame = pd.DataFrame({"x": np.arange(20.0), "y": np.arange(20.0) * 0.5})
    with pytest.raises(ConfigError, match=r"`split` is invalid.*strictly between 0 and 1.*or an eval table"):
        write_table(frame, tmp_path / "d", label="y", split=split)
    with pytest.raises(ConfigError, match=r"`split`"):
        train_table(frame, label="y", out_dir=tmp_path / "t", split=split, config=TINY)
    assert os.listdir(tmp_path) == []


def test_a_split_leaving_no_eval_rows_is_refused(tmp_path):
    frame = pd.DataFrame({"x": np.arange(10.0), "y": np.arange(10.0) * 0.5})
    with pytest.raises(DataError, match=r"no evaluation rows with split=0.01; raise split"):
        write_table(frame, tmp_path / "d", label="y", split=0.01)
    assert os.listdir(tmp_path) == []


def test_an_eval_table_as_split_is_the_eval_split(tmp_path):
    train = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0, 10.0], "c": ["a", "b", "a", "b", "a"], "y": [1, 0, 1, 0, 1]})
    held = pd.DataFrame({"y": [0, 1, 1], "c": ["b", "c", "a"], "x": [100.0, 200.0, 300.0]})
    manifest = write_table(train, tmp_path / "d", label="y", split=held)
    assert manifest["splits"]["train"]["count"] == 5 and manifest["splits"]["eval"]["count"] == 3
    x = manifest["feature_columns"]["x"]
    assert x["mean"] == pytest.approx(np.mean([1, 2, 3, 4, 10])) and x["variance"] == pytest.approx(np.var([1, 2, 3, 4, 10]))
    assert manifest["feature_columns"]["c"]["vocabulary"] == ["a", "b"]  # from the training rows only
    records = [tf.train.Example.FromString(r.numpy()) for r in
               tf.data.TFRecordDataset(str(tmp_path / "d" / "eval-00000-of-00001.tfrecord"))]
    assert sorted(r.features.feature["x"].float_list.value[0] for r in records) == [100.0, 200.0, 300.0]
    with pytest.raises(DataError, match=r"lacks column\(s\) \['c'\]"):
        write_table(train, tmp_path / "e", label="y", split=held.drop(columns="c"))


def test_the_same_model_dir_with_other_rows_is_refused_with_the_usual_choices(tmp_path):
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"x": rng.normal(size=24)})
    frame["y"] = 2 * frame.x
    # export=False throughout: nothing here reads an export (the SavedModel write is a fifth of a training)
    train_table(frame, label="y", model="linear", out_dir=tmp_path, config=TINY, export=False)
    manifest_before = (tmp_path / "data" / "manifest.json").read_bytes()
    recorded = json.loads((tmp_path / "model" / "table.json").read_text())["fingerprint"]
    # the same rows and settings: the checkpoint is this table's, so the rerun resumes
    again = train_table(frame.copy(), label="y", model="linear", out_dir=tmp_path, config=TINY, export=False)
    assert again.global_step == 10
    changed = frame.copy()
    changed.loc[3, "x"] += 1.0
    with pytest.raises(ModelDirConflictError, match=r"trained on another table.*resume = TRUE.*new model dir"):
        train_table(changed, label="y", model="linear", out_dir=tmp_path, config=TINY)
    with pytest.raises(ModelDirConflictError, match="another table"):  # another split is another table
        train_table(frame, label="y", model="linear", out_dir=tmp_path, config=TINY, split=0.25)
    assert (tmp_path / "data" / "manifest.json").read_bytes() == manifest_before  # nothing written
    assert json.loads((tmp_path / "model" / "table.json").read_text())["fingerprint"] == recorded
    # the choices: resume, or a new folder
    resumed = train_table(changed, label="y", model="linear", out_dir=tmp_path, resume=True,
                          config={**TINY, "train": {**TINY["train"], "max_steps": 20}}, export=False)
    assert resumed.global_step == 20
    new = train_table(changed, label="y", model="linear", out_dir=tmp_path / "new", config=TINY, export=False)
    assert new.global_step == 10


def test_date_and_date_time_columns_are_read_as_seconds_since_the_epoch(tmp_path, caplog):
    days = pd.to_datetime(["2020-01-01", "2020-03-01", "2021-06-15", "2019-12-31"] * 5)
    stamps = pd.to_datetime(["2020-01-01 12:00", "2020-01-02 00:30"] * 10).tz_localize("Europe/Paris")
    frame = pd.DataFrame({"day": days, "stamp": stamps, "y": np.arange(20.0)})
    with caplog.at_level(logging.INFO, logger="tpuestimator.tables.frames"):
        plan_manifest = write_table(frame, tmp_path / "d", label="y", split=0.25)
    from tpuestimator.tables import infer_feature_columns

    train_rows = infer_feature_columns(frame, label="y", split=0.25)["train"]
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    day_seconds = np.array([(datetime.datetime(d.year, d.month, d.day, tzinfo=datetime.timezone.utc) - epoch)
                            .total_seconds() for d in days])
    stamp_seconds = np.array([(s.to_pydatetime() - epoch).total_seconds() for s in stamps])  # Paris is UTC+1
    assert stamp_seconds[0] == (datetime.datetime(2020, 1, 1, 11, tzinfo=datetime.timezone.utc) - epoch).total_seconds()
    columns = plan_manifest["feature_columns"]
    assert columns["day"]["type"] == "numeric" and columns["day"]["mean"] == pytest.approx(day_seconds[train_rows].mean())
    assert columns["stamp"]["mean"] == pytest.approx(stamp_seconds[train_rows].mean())
    told = [r.getMessage() for r in caplog.records if "seconds since 1970-01-01" in r.getMessage()]
    assert len(told) == 2 and "'day'" in told[0] and "'stamp'" in told[1]


def test_a_column_of_date_objects_is_refused_naming_the_column_and_the_conversion(tmp_path):
    frame = pd.DataFrame({"when": [datetime.date(2020, 1, d) for d in range(1, 11)], "y": np.arange(10.0)})
    with pytest.raises(DataError, match=r"column 'when' holds date objects.*days since 1970-01-01.*to_datetime") as err:
        write_table(frame, tmp_path / "d", label="y")
    assert "2020" not in str(err.value)  # no dump of the values
    assert os.listdir(tmp_path) == []
