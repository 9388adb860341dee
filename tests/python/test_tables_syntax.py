"""A table's fixes are written in the syntax of the front end the user typed into: Python
keywords (`task="regression"`), the CLI's flags (`--task regression`), R's arguments (the R
bridge: tests/testthat/test-tables-syntax.R). Each fix shown is then applied and works."""
from __future__ import annotations

import logging
import os

import numpy as np
import pandas as pd
import pytest

from tpuestimator.cli import main
from tpuestimator.errors import DataError
from tpuestimator.tables import write_table


def _ozone(n: int = 116) -> pd.DataFrame:
    # an integer label with 52 distinct values: inferred a regression label
    return pd.DataFrame({"x": np.arange(n, dtype=float), "ozone": (np.arange(n) * 7) % 52 + 1})


def _told(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "tpuestimator.tables.frames"]


def test_the_task_note_says_task_classification_in_python(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="tpuestimator.tables.frames"):
        write_table(_ozone(), tmp_path / "d", label="ozone")
    (note,) = _told(caplog)
    assert note.endswith('pass task="classification" for a classifier.')
    manifest = write_table(_ozone(), tmp_path / "c", label="ozone", task="classification")  # the fix, as written
    assert manifest["task"] == "classification"


def test_the_task_note_says_dash_dash_task_classification_from_the_cli(tmp_path, caplog):
    source = tmp_path / "table.csv"
    _ozone().to_csv(source, index=False)
    with caplog.at_level(logging.INFO, logger="tpuestimator.tables.frames"):
        assert main(["data", "write", str(source), str(tmp_path / "d"), "--label", "ozone"]) == 0
    (note,) = _told(caplog)
    assert note.endswith("pass --task classification for a classifier.")
    assert "task=" not in note and "task =" not in note
    fix = note.split("pass ")[1].split(" for a")[0].split()
    assert main(["data", "write", str(source), str(tmp_path / "c"), "--label", "ozone", *fix]) == 0
    assert '"task": "classification"' in (tmp_path / "c" / "manifest.json").read_text()


def test_errors_write_their_fix_as_flags_from_the_cli(tmp_path, capsys):
    one_class = tmp_path / "one.csv"
    pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "y": [3, 3, 3, 3]}).to_csv(one_class, index=False)
    assert main(["data", "write", str(one_class), str(tmp_path / "a"), "--label", "y", "--task",
                 "classification"]) == 2
    err = capsys.readouterr().err
    assert "holds one class only" in err and "(--task regression)" in err and "task=" not in err
    empty = tmp_path / "empty.csv"
    pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "e": [np.nan] * 4, "y": ["a", "b"] * 2}).to_csv(empty, index=False)
    assert main(["data", "write", str(empty), str(tmp_path / "b"), "--label", "y"]) == 2
    err = capsys.readouterr().err
    assert "column 'e' is empty" in err and "delete it from the file" in err and "feature_columns" not in err
    holes = tmp_path / "holes.csv"
    pd.DataFrame({"x": [1.0, np.nan, 3.0, 4.0, 5.0], "y": ["a", "b"] * 2 + ["a"]}).to_csv(holes, index=False)
    assert main(["data", "write", str(holes), str(tmp_path / "c"), "--label", "y"]) == 2
    err = capsys.readouterr().err
    assert "--missing mean" in err and "--missing x=mean" in err and "missing=" not in err
    assert main(["data", "write", str(holes), str(tmp_path / "c"), "--label", "y", "--missing", "x=mean"]) == 0
    assert sorted(os.listdir(tmp_path)) == ["c", "empty.csv", "holes.csv", "one.csv"]


def test_errors_write_their_fix_as_python_keywords_and_the_fix_works(tmp_path):
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "empty": [np.nan] * 4, "y": [3, 3, 3, 3]})
    with pytest.raises(DataError, match=r"train a regressor \(task=\"regression\"\)"):
        write_table(frame, tmp_path / "a", label="y", task="classification",
                    feature_columns={"empty": None})
    frame = pd.DataFrame({"x": np.arange(10.0), "empty": [np.nan] * 10, "y": ["a", "b"] * 5})
    with pytest.raises(DataError, match=r"Drop the column \(feature_columns=\{'empty': None\}\) or fill it"):
        write_table(frame, tmp_path / "b", label="y")
    manifest = write_table(frame, tmp_path / "c", label="y", feature_columns={"empty": None})
    assert sorted(manifest["feature_columns"]) == ["x"]
