"""One reader of run records (issue 12.7): Python's ls_runs() gives exactly the columns, names,
types and order recorded in tests/fixtures/runs/expected_columns.json, which
tests/testthat/test-runs-columns.R checks R's ls_runs() against (the fixture runs folder holds
completed, failed, NaN-stopped, killed, R-written and old-format runs; make_runs.py rebuilds it).

make_runs.py writes expected_columns.json with the reader under test, so that file alone only
catches later changes: the columns, their types and some values are also written by hand here
(`EXPECTED_COLUMNS`), and the file is checked against them."""
from __future__ import annotations

import json

from tpuestimator.runs import check_run_dir
from tpuestimator.runs.columns import column_types
from tpuestimator.runs.query import ls_runs

# The columns of the fixture runs folder, written by hand (issue 24.7), not by the code under
# test: tfruns's order (run_dir, eval_*, metric_*, flag_* in the order the runs first show them,
# then R/ls_runs.R return_runs()'s standard columns, status, then ours by name); the types are
# those R's ls_runs() gives: eval_/metric_ always double, flags as flags.json holds them,
# tfruns's integer properties (samples, batch_size, steps, epochs, *_completed) and ours
# (global_step, max_steps, num_replicas, resumed_from_step) integer, learning_rate double,
# start/end times, completed logical, everything else character.
EXPECTED_COLUMNS = [
    ("run_dir", "character"),
    ("eval_loss", "double"), ("eval_accuracy", "double"), ("eval_acc", "double"),
    ("metric_step", "double"), ("metric_loss", "double"), ("metric_val_loss", "double"),
    ("metric_val_accuracy", "double"), ("metric_acc", "double"), ("metric_val_acc", "double"),
    ("metric_accuracy", "double"),
    ("flag_learning_rate", "double"), ("flag_model", "character"), ("flag_dropout1", "double"),
    ("flag_units", "integer"), ("flag_optimizer.name", "character"), ("flag_optimizer.beta1", "double"),
    ("flag_train.max_steps", "integer"),
    ("samples", "integer"), ("validation_samples", "integer"), ("batch_size", "integer"), ("steps", "integer"),
    ("steps_completed", "integer"), ("epochs", "integer"), ("epochs_completed", "integer"),
    ("metrics", "character"), ("model", "character"), ("loss_function", "character"), ("optimizer", "character"),
    ("learning_rate", "double"), ("script", "character"), ("start", "time"), ("end", "time"),
    ("completed", "logical"), ("output", "character"), ("error_message", "character"),
    ("error_traceback", "character"), ("source_code", "character"), ("context", "character"),
    ("type", "character"),
    ("status", "character"),
    ("global_step", "integer"), ("max_steps", "integer"), ("model_dir", "character"),
    ("nonfinite_report", "character"), ("num_replicas", "integer"), ("resumed_from_step", "integer"),
    ("stopped_early", "character"), ("strategy", "character"),
]
# newest first (tfruns's order: by folder name, which is the start time)
EXPECTED_RUNS = [("2026-11-29T10-05-00Z", "completed"), ("2026-11-29T10-04-00Z", "completed"),
                 ("2026-11-29T10-03-00Z", "interrupted"), ("2026-11-29T10-02-00Z", "failed"),
                 ("2026-11-29T10-01-00Z", "failed"), ("2026-11-29T10-00-00Z", "completed")]
# What Python's ls_runs() holds for each type (None: the run has no such value, R's NA).
PYTHON_TYPES = {"character": (str,), "integer": (int,), "double": (float,), "logical": (bool,), "time": (float,)}


def test_python_reader_gives_the_hand_written_columns_types_and_values(fixtures_dir, monkeypatch):
    monkeypatch.chdir(fixtures_dir / "runs")
    rows = ls_runs("runs")
    assert [(r["run_dir"].rsplit("/", 1)[-1], r["status"]) for r in rows] == EXPECTED_RUNS
    for row in rows:
        assert list(row) == [name for name, _ in EXPECTED_COLUMNS], row["run_dir"]
        for name, kind in EXPECTED_COLUMNS:
            value = row[name]
            if value is None:
                continue
            ok = isinstance(value, PYTHON_TYPES[kind]) and not (kind != "logical" and isinstance(value, bool))
            assert ok, f"{row['run_dir']}: {name} = {value!r} is not {kind}"
    for name, _ in EXPECTED_COLUMNS:  # every column has a value somewhere (else it would not be listed)
        assert any(r[name] is not None for r in rows), name
    by_run = {r["run_dir"].rsplit("/", 1)[-1]: r for r in rows}
    ours, keras = by_run["2026-11-29T10-00-00Z"], by_run["2026-11-29T10-04-00Z"]
    assert (ours["eval_loss"], ours["eval_accuracy"], ours["metric_accuracy"]) == (0.4, 0.65, 0.7)
    assert (ours["epochs"], ours["epochs_completed"], ours["global_step"], ours["max_steps"]) == (3, 3, 300, 300)
    assert (ours["start"], ours["end"], ours["completed"]) == (1795947818.0, 1795947860.5, True)
    assert (ours["flag_learning_rate"], ours["flag_train.max_steps"], ours["stopped_early"]) == (0.01, 300, "FALSE")
    assert (keras["flag_units"], keras["samples"], keras["eval_acc"], keras["optimizer"]) == (128, 60000, 0.94, "RMSprop")
    assert by_run["2026-11-29T10-03-00Z"]["resumed_from_step"] == 0
    assert by_run["2026-11-29T10-02-00Z"]["nonfinite_report"] == "debug/nonfinite-100"
    assert by_run["2026-11-29T10-05-00Z"]["steps_completed"] == 1   # the old format: 1 row of 'steps'


def test_the_shared_expected_columns_file_holds_the_hand_written_columns(fixtures_dir):
    """expected_columns.json (what the R suite checks R's ls_runs() against) says the same."""
    expected = json.loads((fixtures_dir / "runs" / "expected_columns.json").read_text())
    assert [tuple(c) for c in expected["columns"]] == EXPECTED_COLUMNS
    assert [(r["run"], r["status"]) for r in expected["runs"]] == EXPECTED_RUNS


def test_python_reader_matches_the_shared_expected_columns(fixtures_dir, monkeypatch):
    folder = fixtures_dir / "runs"
    expected = json.loads((folder / "expected_columns.json").read_text())
    monkeypatch.chdir(folder)
    rows = ls_runs("runs")
    assert [[k, v] for k, v in column_types(rows).items()] == expected["columns"]
    assert [r["run_dir"].rsplit("/", 1)[-1] for r in rows] == [r["run"] for r in expected["runs"]]
    assert [r["status"] for r in rows] == [r["status"] for r in expected["runs"]]
    assert all(list(r) == [c for c, _ in expected["columns"]] for r in rows)  # every row, every column


def test_fixture_runs_written_by_us_follow_every_rule(fixtures_dir):
    runs = fixtures_dir / "runs" / "runs"
    for name in ("2026-11-29T10-00-00Z", "2026-11-29T10-01-00Z", "2026-11-29T10-02-00Z", "2026-11-29T10-03-00Z",
                 "2026-11-29T10-04-00Z"):
        assert check_run_dir(runs / name) == [], name
    # The pre-issue-12 run breaks rules 7 and 12, and the validator says so.
    problems = check_run_dir(runs / "2026-11-29T10-05-00Z")
    assert any("'step' array" in p for p in problems)
    assert any("rule 12" in p for p in problems)
    assert any("'val_accuracy' has no training 'accuracy'" in p for p in problems)


def test_progress_is_counted_as_tfruns_counts_it(tmp_path):
    """tfruns (R/ls_runs.R run_record(), get_steps_unit()): the rows are counted on the LAST
    metrics.json array but 'epoch', against 'steps' whenever that property exists."""
    from tpuestimator.runs.columns import completed_rows, progress_column
    from tpuestimator.runs.reading import run_record

    assert completed_rows({"epoch": [100, 200, 300], "loss": [1, 2, 3], "val_loss": [1, None, None]}) == 1
    assert completed_rows({"epoch": [100, 200]}) == 0 and completed_rows(None) == 0
    assert progress_column({"steps": 300, "epochs": 3}) == "steps_completed"
    assert progress_column({"epochs": 3}) == "epochs_completed"
    assert progress_column({}) == "steps_completed"
    run = tmp_path / "2026-11-29T10-00-00Z"
    props = run / "tfruns.d" / "properties"
    props.mkdir(parents=True)
    for key, value in {"start": "1.0", "end": "2.0", "completed": "TRUE", "script": "a.yaml", "steps": "300",
                       "epochs": "3"}.items():
        (props / key).write_text(value + "\n")
    (run / "tfruns.d" / "metrics.json").write_text('{"epoch": [100, 200, 300], "loss": [1, 0.5, 0.3]}')
    row = run_record(run)
    assert row["steps_completed"] == 3 and "epochs_completed" not in row and "metric_epoch" not in row
    # tfruns shows "3/300" for this finished run: the validator says so
    assert any("properties/steps" in p and "rule 12" in p for p in check_run_dir(run))
