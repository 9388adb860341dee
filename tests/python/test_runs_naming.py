"""Run folder names: tfruns's UTC start time, unique, and sorting in start order."""
from __future__ import annotations

import re
import threading
import time

from tpuestimator.runs import RunRecorder, latest_run, list_run_dirs
from tpuestimator.runs.naming import create_run_dir, format_run_name, is_run_name, parse_run_name
from tpuestimator.runs.reading import read_properties

PLAIN = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}Z$")


def test_name_is_the_utc_start_time():
    assert format_run_name(1795947818.9) == "2026-11-29T10-23-38Z"
    assert parse_run_name("2026-11-29T10-23-38Z") == 1795947818.0
    assert abs(parse_run_name("2026-11-29T10-23-38.123Z") - 1795947818.123) < 1e-6
    assert is_run_name("2026-11-29T10-23-38.123Z") and not is_run_name("run-1") and not is_run_name("2026-11-29")


def test_run_folder_named_by_its_start_property(tmp_path):
    rec = RunRecorder.create(tmp_path, config={}, flags={}, script="a.yaml", planned_rows=None)
    assert PLAIN.match(rec.name)
    assert rec.name == format_run_name(read_properties(rec.run_dir)["start"])


def test_two_runs_in_the_same_second_get_distinct_start_ordered_names(tmp_path):
    # Start just after a second boundary so both creations fall in the same second.
    time.sleep(1.0 - time.time() % 1.0 + 0.01)
    first = RunRecorder.create(tmp_path, config={}, flags={"i": 1}, script="a.yaml", planned_rows=None)
    second = RunRecorder.create(tmp_path, config={}, flags={"i": 2}, script="a.yaml", planned_rows=None)
    assert first.name != second.name
    assert PLAIN.match(first.name) and PLAIN.match(second.name)
    assert sorted([second.name, first.name]) == [first.name, second.name]
    s1, s2 = read_properties(first.run_dir)["start"], read_properties(second.run_dir)["start"]
    assert s1 < s2 and second.name == format_run_name(s2)
    assert latest_run(tmp_path)["flag_i"] == 2


def test_concurrent_creation_never_shares_a_folder(tmp_path):
    made: list = []
    lock = threading.Lock()

    def create():
        path, _ = create_run_dir(tmp_path)
        with lock:
            made.append(path.name)

    threads = [threading.Thread(target=create) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(made) == 3 and len(set(made)) == 3


def test_list_run_dirs_ignores_archive_and_non_runs(tmp_path):
    for name in ("2026-01-01T00-00-02Z", "2026-01-01T00-00-01Z", "archive/2025-01-01T00-00-00Z"):
        (tmp_path / name / "tfruns.d").mkdir(parents=True)
    (tmp_path / "notes").mkdir()
    (tmp_path / "2026-01-01T00-00-03Z").mkdir()  # no tfruns.d: not a run
    assert [p.name for p in list_run_dirs(tmp_path)] == ["2026-01-01T00-00-01Z", "2026-01-01T00-00-02Z"]
    assert list_run_dirs(tmp_path / "missing") == []
