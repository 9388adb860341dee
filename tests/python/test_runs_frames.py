"""The runs as R's data frames get them (tpuestimator.runs.frames, issue 33.4): the listing as typed
columns, one run as a `tpu_run`, the folder a job reads, the default runs folder, and the
per-example prediction columns (serving.prediction_files.example_prediction_columns). The values
are written by hand from the fixture runs' files; R's side is tests/testthat/test-runs-reader.R."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tpuestimator.runs.frames import default_runs_dir, latest_run_dir, run_summary, run_target, runs_columns
from tpuestimator.serving.prediction_files import example_prediction_columns

NEWEST_FIRST = ["2026-11-29T10-05-00Z", "2026-11-29T10-04-00Z", "2026-11-29T10-03-00Z",
                "2026-11-29T10-02-00Z", "2026-11-29T10-01-00Z", "2026-11-29T10-00-00Z"]


@pytest.fixture
def fixture_runs(fixtures_dir, monkeypatch):
    monkeypatch.chdir(fixtures_dir / "runs")
    return "runs"


@pytest.mark.quick("runs")
def test_runs_columns_are_typed_columns_newest_first(fixture_runs):
    res = runs_columns(fixture_runs)
    cols, types = res["columns"], res["types"]
    assert list(cols) == list(types)
    assert cols["run_dir"] == [os.path.join("runs", name) for name in NEWEST_FIRST]
    assert cols["status"] == ["completed", "completed", "interrupted", "failed", "failed", "completed"]
    assert types["start"] == "time" and types["completed"] == "logical" and types["global_step"] == "integer"
    assert types["stopped_early"] == "character" and types["eval_loss"] == "double"
    ours = NEWEST_FIRST.index("2026-11-29T10-00-00Z")
    assert cols["metric_loss"][ours] == 0.3333333333333333   # the last value of its array
    assert cols["epochs_completed"][ours] == 3
    assert cols["start"][ours] == 1795947818.0 and cols["end"][ours] == 1795947860.5
    nan_run = NEWEST_FIRST.index("2026-11-29T10-02-00Z")
    assert cols["epochs_completed"][nan_run] == 0           # the LAST array (val_loss) is all null
    assert cols["metric_loss"][nan_run] is None
    assert res["warnings"] == []
    assert runs_columns(fixture_runs, latest_n=2)["columns"]["run_dir"] == \
        [os.path.join("runs", name) for name in NEWEST_FIRST[:2]]
    assert runs_columns("no-such-folder") == {"types": {}, "columns": {}, "warnings": []}


def test_an_unreadable_file_is_a_warning_of_the_listing_not_a_log_line(tmp_path, caplog):
    meta = tmp_path / "runs" / "2026-11-29T12-00-00Z" / "tfruns.d"
    meta.mkdir(parents=True)
    (meta / "evaluation.json").write_text('{"loss": NaN, "confusion": [[1, 2], [3, 4]]}')
    res = runs_columns(tmp_path / "runs")
    assert len(res["warnings"]) == 1 and "evaluation.json" in res["warnings"][0]
    assert "Skipping unreadable run file" in res["warnings"][0]
    assert not [r for r in caplog.records if r.name == "tpuestimator.runs.reading"]
    (meta / "evaluation.json").write_text('{"loss": 0.5, "confusion": [[1, 2], [3, 4]], "note": null}')
    res = runs_columns(tmp_path / "runs")
    assert [c for c in res["columns"] if c.startswith("eval_")] == ["eval_loss"]  # no cell holds a list


def test_run_summary_is_a_tpu_run_with_properties_as_text(fixture_runs):
    info = run_summary(os.path.join(fixture_runs, "2026-11-29T10-00-00Z"))
    assert info["run_dir"] == os.path.realpath(os.path.join(fixture_runs, "2026-11-29T10-00-00Z"))
    assert info["global_step"] == 300 and info["completed"] is True
    assert info["start"] == 1795947818.0 and info["end"] == 1795947860.5
    assert info["properties"]["global_step"] == "300" and info["properties"]["completed"] == "TRUE"
    assert info["evaluation"] == {"loss": 0.4, "accuracy": 0.65}
    assert info["history"]["epoch"] == [100, 200, 300]
    assert info["model_dir"] == "models/digits"          # not on this machine: as recorded
    assert info["error"] is None and info["warnings"] == []
    assert run_summary("no-such-run") is None
    assert latest_run_dir(fixture_runs) == os.path.join("runs", NEWEST_FIRST[0])
    assert latest_run_dir("no-such-folder") is None


def test_run_summary_resolves_the_runs_folders_and_reads_its_config(tmp_path):
    run = tmp_path / "runs" / "2026-11-29T12-00-00Z"
    (run / "tfruns.d" / "properties").mkdir(parents=True)
    (run / "export").mkdir()
    (tmp_path / "model").mkdir()
    (run / "config.yaml").write_text(f"run:\n  model_dir: {tmp_path / 'model'}\ntrain:\n  max_steps: 5\n")
    (run / "tfruns.d" / "properties" / "output").write_text("line 1\r\nline 2\n")
    info = run_summary(run)
    assert info["model_dir"] == os.path.realpath(tmp_path / "model")    # from the config
    assert info["export_dir"] == os.path.realpath(run / "export")       # the run's export folder
    assert info["config"]["train"] == {"max_steps": 5}
    assert info["properties"] == {"output": "line 1\nline 2"}         # as R's readLines() joins them
    assert info["global_step"] is None and info["completed"] is None
    assert run_target(str(run)) == os.path.realpath(tmp_path / "model")
    assert run_target(str(run), prefer="export_dir") == os.path.realpath(run / "export")
    assert run_target(str(run), prefer="run_dir") == os.path.realpath(run)
    assert run_target(str(tmp_path / "model")) == str(tmp_path / "model")  # not a run: itself
    assert run_target({"model_dir": None, "run_dir": "r", "export_dir": "e"}) == "r"
    assert run_target({"model_dir": None, "run_dir": None}) is None
    with pytest.raises(ValueError, match="prefer"):
        run_target({}, prefer="model")


def test_default_runs_dir():
    assert default_runs_dir() == "runs" and default_runs_dir(None) == "runs"
    assert default_runs_dir("elsewhere") == "elsewhere"


def test_example_prediction_columns_name_classes_and_vectors():
    rows = [{"probabilities": [0.25, 0.75], "classes": 1, "logits": [0.0, 1.0], "embedding": [1.0, 2.0, 3.0]},
            {"probabilities": [0.5, 0.5], "classes": 0, "logits": [1.0, 1.0], "embedding": [4.0, 5.0, 6.0]}]
    cols = example_prediction_columns(rows, ["cat", "dog"])
    assert list(cols) == ["class_id", "class", "prob_cat", "prob_dog", "logits_cat", "logits_dog",
                          "embedding_0", "embedding_1", "embedding_2"]
    assert cols["class_id"] == [1, 0] and cols["class"] == ["dog", "cat"]
    assert cols["prob_dog"] == [0.75, 0.5]
    no_names = example_prediction_columns(rows)
    assert list(no_names)[:4] == ["class_id", "probabilities_0", "probabilities_1", "logits_0"]
    named = example_prediction_columns({"class_ids": [2], "class_string": b"bird", "score": 0.5})
    assert named == {"class_id": [2], "class": ["bird"], "score": [0.5]}
    assert example_prediction_columns([]) == {"class_id": []}
    ragged = example_prediction_columns([{"v": [1, 2]}, {"v": [3]}, {}])
    assert ragged == {"v_0": [1, 3, None], "v_1": [2, None, None]}


def test_the_runs_reader_imports_no_tensorflow():
    code = ("import sys, tpuestimator.runs.frames, tpuestimator.runs.query; "
            "print(json.dumps(['tensorflow' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [False]
