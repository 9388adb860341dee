"""One reader of run records (issue 12.7): Python's ls_runs() gives exactly the columns, names,
types and order recorded in tests/fixtures/runs/expected_columns.json, which
tests/testthat/test-runs-columns.R checks R's ls_runs() against (the fixture runs folder holds
completed, failed, NaN-stopped, killed, R-written and old-format runs; make_runs.py rebuilds it)."""
from __future__ import annotations

import json

from tpuestimator.runs import check_run_dir
from tpuestimator.runs.query import column_types, ls_runs


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
    from tpuestimator.runs.query import completed_rows, progress_column, run_record

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
