"""Tables, what training does with them: a regression label far from zero learned on its own
scale (the manifest's label mean and std), the linear weights' L2 penalty, column names that
are no valid model input names, and a wide_and_deep model (two optimizers) resumed from its checkpoint."""
from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from tpuestimator.errors import ConfigError, DataError
from tpuestimator.tables import infer_feature_columns, predict_table, train_table, write_table

QUICK = {"train": {"batch_size": 16, "max_steps": 150, "iterations_per_loop": 50, "save_checkpoints_steps": 150},
         "eval": {"batch_size": 16}, "params": {"hidden_units": [8]}}
# wide_and_deep in QUICK's 150 steps: the deep part at 0.01 (its default, 0.001, is chosen for
# runs of up to 1000 steps with early stopping: docs/tables.md); these tests are about names
# and the label's scale, not the default rate (tests/python/test_canned_defaults.py is)
QUICK_DEEP = {**QUICK, "params": {**QUICK["params"], "learning_rate": 0.01}}


def _far_label(n=200, seed=0):
    """y = 1000 + 3 x + noise(sd 0.3): a mean huge beside the spread (like longley's Employed)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return pd.DataFrame({"x": x, "y": 1000.0 + 3.0 * x + rng.normal(scale=0.3, size=n)})


@pytest.mark.parametrize("model", ["linear", "wide_and_deep"])
def test_a_regression_label_far_from_zero_is_learned_in_few_steps(tmp_path, model):
    frame = _far_label()
    result = train_table(frame, label="y", model=model, out_dir=tmp_path,
                         config=QUICK if model == "linear" else QUICK_DEEP, feature_columns={"x": {"part": "both"}})
    manifest = json.loads((tmp_path / "data" / "manifest.json").read_text())
    stats = manifest["label_stats"]
    train_labels = frame.y.to_numpy()[infer_feature_columns(frame, label="y")["train"]]
    assert stats == pytest.approx({"mean": train_labels.mean(), "std": train_labels.std()}, rel=1e-6)
    # 150 steps: a bias starting at 0 would still be hundreds away from 1000
    assert result.metrics["rmse"] < 1.0, result.metrics
    # the loss is the standardized label's; the metrics and the predictions are in the label's units
    assert result.metrics["loss"] == pytest.approx(result.metrics["rmse"] ** 2 / stats["std"] ** 2, rel=1e-3)
    preds = predict_table(result.export_dir, frame.head(20))["prediction"]
    np.testing.assert_allclose(preds, frame.y.head(20), atol=2.0)


def test_standardize_label_false_keeps_the_raw_label(tmp_path):
    config = {**QUICK, "params": {"standardize_label": False}}
    # export=False: nothing here reads the export (the SavedModel write is a fifth of a training)
    result = train_table(_far_label(), label="y", model="linear", out_dir=tmp_path, config=config, export=False)
    assert result.metrics["rmse"] > 100  # what every regressor did before the label was standardized
    with pytest.raises(ConfigError, match="params.label_stats"):
        train_table(_far_label(), label="y", model="linear", out_dir=tmp_path / "bad",
                    config={**QUICK, "params": {"label_stats": {"mean": 0.0, "std": 0.0}}})


@pytest.mark.parametrize("model", ["linear", "wide_and_deep"])
def test_l2_regularization_shrinks_the_linear_weights(tmp_path, model):
    species = os.path.join(os.environ.get("TPUESTIMATOR_FIXTURES", "tests/fixtures"), "tables", "species.csv")
    columns = {"habitat": {"part": "wide"}, **({"petal_length": {"part": "wide"}} if model == "wide_and_deep" else {})}
    frame = pd.read_csv(species)
    confidence = {}
    for l2 in (0.0, 0.5):  # the same seed: without the penalty both runs are the same model
        config = {**QUICK, "params": {**QUICK["params"], "l2_regularization": l2}}
        result = train_table(species, label="species", model=model, out_dir=tmp_path / str(l2), config=config,
                             feature_columns=columns)
        preds = predict_table(result.export_dir, frame)
        probs = np.stack([v for k, v in preds.items() if k.startswith("prob_")], axis=1)
        confidence[l2] = float(probs.max(axis=1).mean())
    # smaller linear weights: less confident class probabilities (wide_and_deep's unpenalised deep part
    # makes up for some of it)
    assert confidence[0.5] < confidence[0.0] - 0.01, confidence
    with pytest.raises(ConfigError, match="params.l2_regularization"):
        train_table(species, label="species", model=model, out_dir=tmp_path / "bad",
                    config={**QUICK, "params": {"l2_regularization": -1}})


def _odd_names(n=120, seed=0):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"od280/od315 of wines": rng.normal(size=n), "Petal.Length": rng.normal(size=n),
                          "my colour": rng.choice(["red", "white", "rosé"], n)})
    frame["y"] = 2 * frame["od280/od315 of wines"] - frame["Petal.Length"] + (frame["my colour"] == "red") + \
        rng.normal(scale=0.1, size=n)
    return frame


@pytest.fixture(scope="module")
def odd_names_model(tmp_path_factory):
    out = tmp_path_factory.mktemp("odd")
    frame = _odd_names()
    return out, frame, train_table(frame, label="y", model="wide_and_deep", out_dir=out,
                                   feature_columns={"my colour": {"encoding": "embedding", "embedding_dim": 2}},
                                   config=QUICK_DEEP)


def test_columns_keras_refuses_as_names_train_export_and_predict(odd_names_model, tmp_path):
    out, frame, result = odd_names_model
    assert result.metrics["r2"] > 0.8
    manifest = json.loads((out / "data" / "manifest.json").read_text())
    assert {"od280/od315 of wines", "Petal.Length", "my colour"} == set(manifest["feature_columns"])
    from tpuestimator.serving.exports import open_export

    export = open_export(str(result.export_dir))
    assert set(export.input_specs("features")) == {"od280_od315_of_wines", "petal_length", "my_colour"}
    by_frame = predict_table(result.export_dir, frame.head(8))["prediction"]
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(out / "data" / "train-00000-of-00001.tfrecord"))]
    by_example = export.run("serving_default", records[:8])["prediction"]
    assert by_frame.shape == by_example.shape == (8,) and np.isfinite(by_frame).all()
    # the features signature takes the columns' own names too
    raw = {"od280/od315 of wines": frame["od280/od315 of wines"].to_numpy(np.float32)[:3],
           "Petal.Length": frame["Petal.Length"].to_numpy(np.float32)[:3],
           "my colour": frame["my colour"].to_numpy(object)[:3]}
    np.testing.assert_allclose(export.run("features", raw)["prediction"], by_frame[:3], rtol=1e-5)
    for model in ("linear", "dnn"):
        other = train_table(frame, label="y", model=model, out_dir=tmp_path / model, config=QUICK)
        assert np.isfinite(predict_table(other.export_dir, frame.head(3))["prediction"]).all()


def test_columns_with_the_same_input_name_are_refused_at_write_time(tmp_path):
    frame = pd.DataFrame({"a.b": [1.0, 2.0, 3.0, 4.0], "A b": [1.0, 0.0, 1.0, 0.0], "y": [1.0, 2.0, 3.0, 4.5]})
    with pytest.raises(DataError, match=r"columns 'a.b' and 'A b' both become the model input 'a_b'.*Rename"):
        write_table(frame, tmp_path / "d", label="y")
    assert os.listdir(tmp_path) == []


def _checkpoint_values(model_dir) -> dict:
    reader = tf.train.load_checkpoint(str(model_dir))
    return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
            if k.startswith(("model/", "optimizer/", "step/"))}


def test_wide_and_deep_resumes_with_both_optimizers(tmp_path):
    species = os.path.join(os.environ.get("TPUESTIMATOR_FIXTURES", "tests/fixtures"), "tables", "species.csv")

    def config(steps):
        return {"train": {"batch_size": 16, "max_steps": steps, "iterations_per_loop": 20,
                          "save_checkpoints_steps": 20}, "eval": {"batch_size": 16},
                "params": {"hidden_units": [8], "learning_rate": 0.05}, "run": {"seed": 3}}

    def train(folder, steps):  # the checkpoints are compared: no export (a fifth of a training)
        return train_table(species, label="species", model="wide_and_deep", out_dir=tmp_path / folder,
                           config=config(steps), export=False)

    whole = train("whole", 80)
    first = train("split", 40)
    assert first.metrics["global_step"] == 40
    resumed = train("split", 80)
    assert resumed.metrics["global_step"] == 80
    a, b = _checkpoint_values(whole.model_dir), _checkpoint_values(resumed.model_dir)
    assert set(a) == set(b)
    # both optimizers' state came back from the checkpoint: the wide (Ftrl) one counts 80 steps too
    iterations = {k: int(v) for k, v in b.items() if k.endswith("_iterations/.ATTRIBUTES/VARIABLE_VALUE")}
    assert sorted(iterations.values()) == [80, 80], iterations
    for key in a:
        np.testing.assert_allclose(b[key], a[key], rtol=1e-4, atol=1e-5, err_msg=key)
    assert resumed.metrics["accuracy"] == pytest.approx(whole.metrics["accuracy"])


def test_a_binary_linear_classifier_with_l2_is_l2_logistic_regression(tmp_path):
    """One logit, as the premade binary head: `l2_regularization = 1 / (2 n)` on the mean loss is
    scikit-learn's `LogisticRegression(C=1)` on the summed loss (two softmax logits would share
    the penalty between two weight vectors: half of it)."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(1)
    n = 50
    frame = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n), "colour": rng.choice(["a", "b", "c"], n)})
    frame["y"] = (frame.x1 - 0.5 * frame.x2 + (frame.colour == "a") + rng.normal(size=n) > 0.3).astype(int)
    plan = infer_feature_columns(frame, label="y")
    train, columns = plan["train"], plan["feature_columns"]
    # full-batch Adam at 0.3 is within 1e-5 of the optimum by step 300 (1,500 steps at 0.05 took 4x the CPU)
    config = {"train": {"batch_size": len(train), "max_steps": 300, "iterations_per_loop": 300,
                        "save_checkpoints_steps": 300}, "eval": {"batch_size": 16},
              "params": {"l2_regularization": 1.0 / (2 * len(train)), "optimizer": "adam", "learning_rate": 0.3}}
    # trained to the optimum the reference reaches: no early stopping (a table's default), which
    # would keep the held-out rows' best step instead
    result = train_table(frame, label="y", model="linear", out_dir=tmp_path, config=config, early_stopping=False)
    ours = predict_table(result.export_dir, frame)["prob_1"]
    design = np.column_stack([(frame[c] - columns[c]["mean"]) / np.sqrt(columns[c]["variance"]) for c in ("x1", "x2")]
                             + [(frame.colour == v).to_numpy(float) for v in columns["colour"]["vocabulary"]])
    reference = LogisticRegression(C=1.0, tol=1e-10, max_iter=10_000).fit(design[train], frame.y.to_numpy()[train])
    np.testing.assert_allclose(ours, reference.predict_proba(design)[:, 1], atol=0.005)
