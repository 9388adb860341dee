"""Issue 34 items 6, 7, 11 on the Python side: a table run is recorded in ``runs/`` of the
working folder like every job; `tune_table` tunes a canned model on a table (one model per
combination, the runs listed by `ls_runs`); missing values are reported for every column at once
with rows counted from 1, the fix in Python syntax here and in R syntax through the R bridge.
(conftest.py runs these tests in a temporary working folder.)
"""
from __future__ import annotations

import logging
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tpuestimator.errors import ConfigError, DataError
from tpuestimator.runs.query import ls_runs
from tpuestimator.tables import infer_feature_columns, predict_table, train_table, tune_table
from tpuestimator.tables.predict import table_inputs

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "inst" / "python"))
import tpuestimatorr_bridge as bridge  # noqa: E402

TINY = {"train": {"batch_size": 8, "max_steps": 10, "iterations_per_loop": 10, "save_checkpoints_steps": 10},
        "eval": {"batch_size": 8}}


def _line(n: int = 40) -> pd.DataFrame:
    x = np.arange(1, n + 1) / n
    return pd.DataFrame({"x": x, "z": x[::-1].copy(), "y": 2 * x + 1})


def test_a_table_run_is_recorded_in_runs_of_the_working_folder(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.DEBUG)
    # TensorFlow logs the note at INFO through absl: a test that ran earlier in this process may
    # have left absl's (or tensorflow's) logger at WARNING, and then there is no note to judge
    for name in ("absl", "tensorflow"):
        caplog.set_level(logging.DEBUG, logger=name)
    result = train_table(_line().assign(g=["a", "b"] * 20), label="y", model="linear", out_dir=tmp_path / "cars",
                         config=TINY)
    # TensorFlow's note on renamed captured inputs (one per traced signature): once, at debug level
    renaming = [r for r in caplog.records if "contains input name(s)" in r.getMessage()]
    assert [(r.name, r.levelno) for r in renaming] == [("tpuestimator.core.signatures", logging.DEBUG)]
    # not out_dir/runs: where ls_runs (and R's tpu_ls_runs, tfruns::ls_runs) look by default
    assert Path(result.run_dir).resolve().parent == tmp_path / "runs"
    assert [Path(r["run_dir"]).resolve() for r in ls_runs()] == [Path(result.run_dir).resolve()]
    assert not (tmp_path / "cars" / "runs").exists()


def test_tune_table_trains_one_model_per_combination_and_lists_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame = _line()
    # Adam: at these two rates its 10 steps end at two different RMSEs, so a run's recorded
    # evaluation cannot pass for the other's (linear's default Ftrl fits this noiseless line to
    # float32 round-off, ~4e-7, at both)
    results = tune_table(frame, label="y", model="linear", flags={"learning_rate": [0.01, 0.3]},
                         config={**TINY, "params": {"optimizer": "adam"}})
    assert len(results) == 2
    model_dirs = {Path(r.model_dir).resolve() for r in results}
    assert len(model_dirs) == 2 and {d.parent for d in model_dirs} == {tmp_path / "runs" / ".models"}
    runs = ls_runs(order="flag_learning_rate", decreasing=False)
    assert [r["flag_learning_rate"] for r in runs] == [0.01, 0.3]
    assert len({r["tuning_run"] for r in runs}) == 1
    assert [r.config["params"]["learning_rate"] for r in results] == [0.01, 0.3]
    # each run's recorded evaluation is its own model's, on the held-out rows: the RMSE numpy
    # computes from that model's predictions
    eval_rows = infer_feature_columns(frame, label="y")["eval"]
    held_out = frame.iloc[eval_rows]
    for result in results:
        pred = predict_table(result.export_dir, held_out)["prediction"]
        assert math.isclose(result.metrics["rmse"], float(np.sqrt(np.mean((pred - held_out["y"]) ** 2))),
                            rel_tol=1e-4)
    assert results[0].metrics["rmse"] != results[1].metrics["rmse"]
    # a misspelt flag is refused before the table is written
    with pytest.raises(ConfigError, match="learning_rat"):
        tune_table(frame.assign(y=frame["y"] * 2), label="y", model="linear", flags={"learning_rat": [0.1]},
                   config=TINY, runs_dir=str(tmp_path / "bad"))
    assert not (tmp_path / "bad").exists()


def _holes() -> pd.DataFrame:
    frame = pd.DataFrame({"x": np.arange(12, dtype=float), "z": list("abcabcabcabc"),
                          "my col": np.arange(12, dtype=float), "y": np.arange(12, dtype=float)})
    frame.loc[[1, 6], "x"] = np.nan
    frame.loc[2, "z"] = None
    frame.loc[11, "my col"] = np.nan
    return frame


def test_missing_values_are_listed_for_every_column_with_rows_from_one():
    frame = _holes()
    with pytest.raises(DataError) as caught:
        infer_feature_columns(frame, label="y")
    err = caught.value
    counts = frame.drop(columns="y").isna().sum()
    assert {k: v["count"] for k, v in err.missing_columns.items()} == {k: int(v) for k, v in counts.items() if v}
    for name, info in err.missing_columns.items():
        assert info["rows"] == [int(i) + 1 for i in np.flatnonzero(frame[name].isna())]
    message = str(err)
    assert "'x' (2 missing, rows 2, 7), 'z' (1 missing, row 3), 'my col' (1 missing, row 12)" in message
    assert "missing='mean'" in message
    assert "missing={'x': 'mean', 'z': 'oov', 'my col': 'mean'}" in message
    # the proposed fix works in one try: means for numbers, the OOV bucket for categories
    plan = infer_feature_columns(frame, label="y", missing="mean")
    assert {k: c["missing"] for k, c in plan["feature_columns"].items()} == {"x": "mean", "z": "oov",
                                                                             "my col": "mean"}


def test_missing_values_speak_r_through_the_bridge_and_count_rows_of_the_whole_table():
    frame = _holes()
    with pytest.raises(DataError) as caught, bridge.tables._r_syntax():
        infer_feature_columns(frame, label="y")
    message = str(caught.value)
    assert 'missing = list(x = "mean", z = "oov", `my col` = "mean")' in message
    assert 'missing = "mean"' in message and "{" not in message
    columns = infer_feature_columns(frame, label="y", missing="mean")["feature_columns"]
    columns["x"]["missing"] = columns["my col"]["missing"] = "error"
    # prediction from a chunk starting at row 101 of the whole table: rows counted in the table
    with pytest.raises(DataError, match=r"'x' \(2 missing, rows 102, 107\), 'my col' \(1 missing, row 112\)"):
        table_inputs(frame, columns, first_row=100)
