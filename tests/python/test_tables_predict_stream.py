"""Batch prediction of a table model from CSV and Parquet files read in chunks: the file's
rows go through the export one chunk at a time (a chunk smaller than the file, counted), the
predictions are written chunk by chunk into an atomic output, and equal the in-memory
`predict_table`'s; a bad value in a later chunk names the table's row and leaves no output."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tpuestimator.cli import main
from tpuestimator.errors import ConfigError, DataError
from tpuestimator.tables import predict_table, predict_table_to_file, train_table
from tpuestimator.tables.predict import iter_table_chunks

FIXTURES = Path(os.environ.get("TPUESTIMATOR_FIXTURES", Path(__file__).resolve().parents[1] / "fixtures"))
CARS = FIXTURES / "tables" / "cars.csv"
SPECIES = FIXTURES / "tables" / "species.csv"
QUICK = {"train": {"batch_size": 16, "max_steps": 40, "iterations_per_loop": 20, "save_checkpoints_steps": 40},
         "eval": {"batch_size": 16}, "params": {"hidden_units": [8]}}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    out = tmp_path_factory.mktemp("stream")
    regressor = train_table(CARS, label="mpg", model="linear", out_dir=out / "cars", config=QUICK,
                            missing={"horsepower": "mean"})
    classifier = train_table(SPECIES, label="species", model="dnn", out_dir=out / "species", config=QUICK)
    return {"cars": (regressor.export_dir, pd.read_csv(CARS)), "species": (classifier.export_dir, pd.read_csv(SPECIES))}


@pytest.mark.parametrize("table, suffix", [("cars", ".csv"), ("species", ".parquet")])
def test_a_file_is_predicted_chunk_by_chunk_as_in_memory(models, tmp_path, table, suffix):
    export_dir, frame = models[table]
    big = pd.concat([frame] * 4, ignore_index=True)  # 4x the fixture: many chunks of 50 rows
    source = tmp_path / f"table{suffix}"
    big.to_csv(source, index=False) if suffix == ".csv" else big.to_parquet(source, index=False)
    first_rows = [first for first, chunk in iter_table_chunks(str(source), chunk_rows=50)]
    assert first_rows == list(range(0, len(big), 50))  # the reader never held more than 50 rows
    out = tmp_path / "predictions.csv"
    seen = []
    result = predict_table_to_file(export_dir, str(source), out, chunk_rows=50, batch_size=16, progress=seen.append)
    assert result["rows"] == len(big) and result["chunks"] == len(first_rows) > 1
    assert seen == [min(50, len(big) - f) for f in first_rows]
    written = pd.read_csv(out)
    expected = predict_table(export_dir, big)  # the whole frame in memory
    assert list(written["index"]) == list(range(len(big))) and set(written["source"]) == {str(source)}
    for key, values in expected.items():
        if values.dtype == object:
            assert list(written[key].astype(str)) == [str(v) for v in values], key
        else:
            np.testing.assert_allclose(written[key].to_numpy(), values, rtol=1e-6, err_msg=key)
    # predict_table on the path reads it in chunks too, with the same answers
    by_path = predict_table(export_dir, str(source), chunk_rows=50)
    for key, values in expected.items():  # other batch boundaries: float32 rounding apart
        if values.dtype == object:
            np.testing.assert_array_equal(by_path[key], values)
        else:
            np.testing.assert_allclose(by_path[key], values, rtol=1e-6, err_msg=key)


def test_a_bad_value_in_a_later_chunk_names_the_row_and_writes_nothing(models, tmp_path):
    export_dir, frame = models["cars"]
    big = pd.concat([frame] * 3, ignore_index=True)
    big["weight"] = big["weight"].astype(object)
    big.loc[130, "weight"] = "heavy"
    source = tmp_path / "cars.csv"
    big.to_csv(source, index=False)
    out = tmp_path / "out" / "predictions.parquet"
    with pytest.raises(DataError, match=r"column 'weight' row 131 holds 'heavy'"):
        predict_table_to_file(export_dir, str(source), out, chunk_rows=40)
    assert not out.exists() and [p.name for p in out.parent.iterdir()] == []


def test_the_cli_predicts_a_table_file(models, tmp_path, capsys):
    export_dir, frame = models["species"]
    source = tmp_path / "species.csv"
    frame.to_csv(source, index=False)
    out = tmp_path / "p.parquet"
    assert main(["predict", str(export_dir), str(source), "--out", str(out), "--chunk-rows", "32"]) == 0
    assert f"{len(frame)} rows (3 chunks)" in capsys.readouterr().out
    written = pd.read_parquet(out)
    assert list(written.columns[:4]) == ["source", "index", "class_id", "class"]
    # each row's own number in the table (from 0, across the 3 chunks) and the file it came from
    assert list(written["index"]) == list(range(len(frame))) and set(written["source"]) == {str(source)}
    assert list(written["class"]) == list(predict_table(export_dir, frame)["class"])
    assert main(["predict", str(export_dir), str(source), "--limit", "2"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and '"index": 1' in lines[1] and '"prob_setosa"' in lines[0]


def test_chunk_rows_below_one_is_refused_not_replaced_by_the_default(models):
    export_dir, frame = models["cars"]
    for bad in (0, -5):
        with pytest.raises(ConfigError, match="chunk_rows"):
            predict_table(export_dir, frame, chunk_rows=bad)
