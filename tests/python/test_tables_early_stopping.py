"""Issue 34 item 8: a table's training stops early by default on its held-out split, and the
model exported (and evaluated) is the best evaluation's. The overfitting table is noise: its
labels are coin flips, so the held-out loss is lowest early and rises as the `dnn` memorises
the training rows. (conftest.py runs these tests in a temporary working folder.)
"""
from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from tpuestimator.config import load_config
from tpuestimator.errors import ConfigError
from tpuestimator.runs.reading import read_properties
from tpuestimator.tables import predict_table, train_table, write_table
from tpuestimator.tables.stopping import TABLE_EARLY_STOPPING, apply_table_stopping, evaluation_cadence

MAX_STEPS = 400
# fixed here (not the canned defaults, which may be retuned): a wide net and a fast optimizer
PARAMS = {"hidden_units": [64, 64], "optimizer": "adam", "learning_rate": 0.02}


def _noise(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({f"x{i}": rng.normal(size=n) for i in range(6)})
    frame["y"] = rng.integers(0, 2, size=n)
    return frame


def _log_loss(export_dir: str, frame: pd.DataFrame) -> float:
    """The binary cross-entropy of the export's probabilities on `frame`, by numpy."""
    p = np.clip(predict_table(export_dir, frame.drop(columns=["y"]))["prob_1"].astype(np.float64), 1e-12, 1 - 1e-12)
    y = frame["y"].to_numpy()
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def _train(out_dir, **kwargs):
    return train_table(_noise(80, 0), label="y", out_dir=out_dir, model="dnn", split=_noise(40, 1),
                       task="classification",
                       config={"train": {"batch_size": 16, "max_steps": MAX_STEPS}, "params": PARAMS}, **kwargs)


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    return _train(tmp_path_factory.mktemp("stop") / "noise")


def test_a_table_stops_early_and_exports_its_best_evaluation(stopped):
    losses = {h["step"]: h["loss"] for h in stopped.history}
    best_step = min(losses, key=losses.get)
    every = 5  # an epoch: 80 rows in batches of 16 (max_steps / 10 = 40 is later)
    assert sorted(losses) == list(range(every, stopped.global_step + 1, every))
    # stopped at the 6th evaluation without improvement (patience 5), well before max_steps
    assert stopped.stopped_early and stopped.global_step == best_step + 6 * every < MAX_STEPS
    assert stopped.best_step == best_step < stopped.global_step
    # the export is the best evaluation's model: its version, and its held-out loss recomputed
    assert os.path.basename(stopped.export_dir) == str(best_step)
    held_out = _noise(40, 1)
    assert _log_loss(stopped.export_dir, held_out) == pytest.approx(losses[best_step], abs=1e-5)
    assert stopped.metrics["loss"] == pytest.approx(losses[best_step], abs=1e-6)
    assert stopped.metrics["global_step"] == best_step
    properties = read_properties(stopped.run_dir)
    assert properties["stopped_early"] == "TRUE" and int(properties["best_step"]) == best_step
    assert int(properties["global_step"]) == stopped.global_step


def test_exporting_a_stopped_table_model_exports_the_best_evaluations_weights(stopped):
    from tpuestimator.jobs.model_dir_jobs import export_model

    exported = export_model(stopped.model_dir, format="saved_model").path  # `tpuestimator export MODEL_DIR`
    assert os.path.basename(exported) == str(stopped.best_step)
    held_out = _noise(40, 1).drop(columns=["y"])
    np.testing.assert_allclose(predict_table(exported, held_out)["prob_1"],
                               predict_table(stopped.export_dir, held_out)["prob_1"], atol=1e-6)


def test_turning_early_stopping_off_trains_max_steps_and_exports_the_last(tmp_path, stopped):
    result = _train(tmp_path / "noise", early_stopping=False)
    assert result.global_step == MAX_STEPS and not result.stopped_early and result.best_step is None
    assert os.path.basename(result.export_dir) == str(MAX_STEPS)
    assert [h["step"] for h in result.history] == [MAX_STEPS]  # one evaluation, at the end, as before
    # the noise was memorised: the last model is worse on the held-out rows than the best one (its
    # probabilities saturate in float32, so its loss is recomputed only roughly here)
    assert _log_loss(result.export_dir, _noise(40, 1)) > min(h["loss"] for h in stopped.history) + 0.5
    assert result.metrics["loss"] > min(h["loss"] for h in stopped.history) + 0.5


def test_a_rerun_of_a_stopped_training_keeps_its_best_export(tmp_path):
    first = _train(tmp_path / "noise", early_stopping={"patience": 1})
    assert first.stopped_early and first.global_step == first.best_step + 2 * 5  # patience 1: 2 evaluations
    again = _train(tmp_path / "noise", early_stopping={"patience": 1})  # same rows: resumes, no refusal
    assert again.stopped_early and again.best_step == first.best_step
    assert again.export_dir == first.export_dir
    assert again.metrics["loss"] == pytest.approx(first.metrics["loss"], abs=1e-6)


def test_the_config_loader_gives_a_table_early_stopping_and_a_config_overrides_it(tmp_path):
    manifest = write_table(_noise(80, 0), tmp_path / "data", label="y", task="classification")["path"]
    base = {"model": "dnn", "data": {"manifest": manifest}, "train": {"batch_size": 16, "max_steps": 2000}}
    cfg = load_config(base)  # the CLI's path: a config naming a table's manifest
    assert cfg.eval.early_stopping.metric == "loss" and cfg.eval.early_stopping.patience == 5
    assert cfg.eval.early_stopping.restore_best and cfg.eval.early_stopping.mode == "min"
    assert cfg.eval.every_n_steps == 4 and cfg.train.iterations_per_loop == 4  # 64 rows / 16: an epoch, 4 steps
    assert load_config(base, ["eval.early_stopping=null"]).eval.early_stopping is None
    assert load_config(base, ["eval.early_stopping=false"]).eval.early_stopping is None
    own = load_config(base, ["eval.early_stopping.patience=9", "eval.early_stopping.metric=accuracy"])
    assert (own.eval.early_stopping.patience, own.eval.early_stopping.mode) == (9, "max")
    assert load_config(base, ["eval.every_n_steps=200"]).eval.every_n_steps == 200
    # not a table: nothing changes
    images = {"model": "dnn", "data": {"format": "mnist", "image": {"height": 2, "width": 2, "channels": 1},
                                       "train": str(tmp_path / "x*")}}
    raw = json.loads(json.dumps(images))
    apply_table_stopping(raw)
    assert raw == images


@pytest.mark.parametrize("steps,loop,epoch,expected", [
    (1000, None, None, (100, None)), (500, None, None, (50, 50)), (1500, None, None, (100, None)),
    (1000, None, 7, (5, 5)), (1000, None, 3, (2, 2)), (50_000, None, 1250, (1200, None)),
    (1000, 30, 7, (30, None)), (2000, 30, None, (180, None)),
])
def test_the_evaluation_cadence_is_a_tenth_of_the_steps_or_an_epoch(steps, loop, epoch, expected):
    assert evaluation_cadence(steps, loop, epoch) == expected


def test_a_bad_early_stopping_argument_is_refused_naming_it(tmp_path):
    with pytest.raises(ConfigError, match="early_stopping"):
        _train(tmp_path / "bad", early_stopping="yes")
    with pytest.raises(ConfigError, match="early_stopping.*patient is none of them"):
        _train(tmp_path / "bad", early_stopping={"patient": 3})
    assert not (tmp_path / "bad").exists()
    assert TABLE_EARLY_STOPPING == {"metric": "loss", "mode": "min", "patience": 5, "restore_best": True}
