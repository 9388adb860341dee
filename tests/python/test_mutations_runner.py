"""scripts/mutations.py, the runner that proves the suite bites (tests/MUTATIONS.md): how it reads
entries, where it finds a break, how it reads pytest's and testthat's reports and what it calls
caught. Synthetic inputs, no TensorFlow; one end-to-end run on a tiny git repository."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "mutations.py"

_spec = importlib.util.spec_from_file_location("mutations_runner", SCRIPT)
mutations = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = mutations   # dataclasses look their module up while the class is built
_spec.loader.exec_module(mutations)

ReportedOutcome = mutations.ReportedOutcome

ENTRIES = textwrap.dedent('''\
    # Mutations

    ## M1. A Python break

    Prose.

    Tests: `tests/python/test_a.py::test_one` `tests/python/test_a.py::TestK::test_two[x::y]`

    ```find
    return a + b
    ```

    ```replace
    return a - b
    ```

    ## M100. An R break

    Tests: ``tests/testthat/test-b.R::an unknown model name is a config error naming `model` `` `tests/testthat/test-b.R::plain`

    ```find
      x + 1
    ```

    ```replace
      x + 2
    ```
    ''')


def test_entries_are_read_with_their_pytest_and_testthat_ids():
    first, second = mutations.parse_mutations(ENTRIES)
    assert (first.key, first.title) == ("M1", "A Python break")
    assert first.tests == ["tests/python/test_a.py::test_one", "tests/python/test_a.py::TestK::test_two[x::y]"]
    assert (first.find, first.replace) == ("return a + b\n", "return a - b\n")
    assert second.key == "M100"
    # a description holding a backquote is written as a ``double`` code span
    assert second.tests == ["tests/testthat/test-b.R::an unknown model name is a config error naming `model`",
                            "tests/testthat/test-b.R::plain"]
    assert mutations.split_test_id(second.tests[0]) == (
        "testthat", "tests/testthat/test-b.R", "an unknown model name is a config error naming `model`")
    assert mutations.split_test_id(first.tests[1]) == ("pytest", "tests/python/test_a.py", "TestK::test_two[x::y]")


@pytest.mark.parametrize("tests_line, complaint", [
    ("`tests/python/test_a.py`", "not a test id"),
    ("`tests/R/test-b.R::x`", "expected a pytest id"),
    ("no ids here", "names no test"),
])
def test_an_entry_with_a_bad_tests_line_is_refused_naming_the_entry(tests_line, complaint):
    text = ENTRIES.replace("Tests: `tests/python/test_a.py::test_one` `tests/python/test_a.py::TestK::test_two[x::y]`",
                           f"Tests: {tests_line}")
    with pytest.raises(SystemExit, match=rf"entry M1.*{complaint}|entry M1 {complaint}"):
        mutations.parse_mutations(text)


def test_an_entry_number_used_twice_is_refused():
    with pytest.raises(SystemExit, match=r"numbered twice: \['M1'\]"):
        mutations.parse_mutations(ENTRIES + ENTRIES.split("# Mutations\n", 1)[1].split("## M100")[0])


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_find_text_is_found_in_one_R_file_or_python_file_exactly_once(tmp_path):
    r_file = write(tmp_path / "R" / "tables.R", "f <- function(x) {\n  x + 1\n}\n")
    write(tmp_path / "python" / "pkg" / "mod.py", "def add(a, b):\n    return a + b\n")
    write(tmp_path / "inst" / "python" / "bridge" / "__init__.py", "VALUE = 3\n")
    write(tmp_path / "tests" / "testthat" / "test-x.R", "  x + 1\nVALUE = 3\n")   # tests are never mutated
    write(tmp_path / "R" / "notes.txt", "  x + 1\n")                             # nor other kinds of file
    assert mutations.locate(tmp_path, "  x + 1\n") == (r_file, "")
    assert mutations.locate(tmp_path, "VALUE = 3")[0] == tmp_path / "inst" / "python" / "bridge" / "__init__.py"
    assert mutations.locate(tmp_path, "return a + b")[0] == tmp_path / "python" / "pkg" / "mod.py"


def test_a_find_text_found_twice_or_nowhere_is_target_not_found(tmp_path):
    write(tmp_path / "R" / "a.R", "y <- x + 1\n")
    write(tmp_path / "R" / "b.R", "z <- x + 1\nw <- 2\nw <- 2\n")
    assert mutations.locate(tmp_path, "x + 1") == (
        None, "the find text occurs more than once: R/a.R x1, R/b.R x1")
    assert mutations.locate(tmp_path, "w <- 2") == (None, "the find text occurs more than once: R/b.R x2")
    assert mutations.locate(tmp_path, "absent") == (None, "the find text is in no file")
    outcome = mutations.apply_and_test(mutations.Runner(tmp_path, tmp_path),
                                       mutations.Mutation("M9", "t", ["tests/python/test_a.py::t"], "x + 1", "x"))
    assert (outcome.result, outcome.seconds) == ("target not found", 0.0)
    assert "more than once" in outcome.detail
    assert (tmp_path / "R" / "a.R").read_text() == "y <- x + 1\n"   # nothing applied


def test_junit_names_follow_pytest_for_functions_classes_and_parameters():
    assert mutations.junit_key("tests/python/test_x.py::test_a") == ("tests.python.test_x", "test_a")
    assert mutations.junit_key("tests/python/test_x.py::TestK::test_b[x::y]") == ("tests.python.test_x.TestK",
                                                                               "test_b[x::y]")
    assert mutations.junit_key("tests/python/test_x.py::test_c[SIGTERM]") == ("tests.python.test_x",
                                                                           "test_c[SIGTERM]")


# As pytest 9 writes it (trimmed): a pass, a failure, a fixture error, a skip, a class test.
JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest">
<testcase classname="tests.python.test_a" name="test_ok" time="0.0" />
<testcase classname="tests.python.test_a" name="test_fail"><failure message="assert 1 == 2">E assert 1 == 2</failure></testcase>
<testcase classname="tests.python.test_a" name="test_setup"><error message="failed on setup with &quot;RuntimeError: boom&quot;">E RuntimeError: boom</error></testcase>
<testcase classname="tests.python.test_a" name="test_skip"><skipped type="pytest.skip" message="why">why</skipped></testcase>
<testcase classname="tests.python.test_a.TestK" name="test_p[x::y]"><failure message="AssertionError: no">E no</failure></testcase>
<testcase classname="tests.python.test_a" name="test_q[1]" time="0.0" />
<testcase classname="tests.python.test_a" name="test_q[2]"><failure message="assert 2 == 3">E assert 2 == 3</failure></testcase>
<testcase classname="tests.python.test_a" name="test_r[1]" time="0.0" />
<testcase classname="tests.python.test_a" name="test_r[2]" time="0.0" />
</testsuite></testsuites>"""


def test_each_pytest_outcome_is_read_from_the_junit_report():
    ids = {name: f"tests/python/test_a.py::{name}" for name in
           ("test_ok", "test_fail", "test_setup", "test_skip", "TestK::test_p[x::y]", "test_gone", "test_q", "test_r")}
    out = mutations.pytest_outcomes(list(ids.values()), JUNIT, log_text="")
    assert out[ids["test_ok"]] == ReportedOutcome("passed")
    assert out[ids["test_fail"]] == ReportedOutcome("failed", "assert 1 == 2")
    assert out[ids["test_setup"]].status == "setup error"
    assert "RuntimeError: boom" in out[ids["test_setup"]].message
    assert out[ids["test_skip"]] == ReportedOutcome("skipped", "why")
    assert out[ids["TestK::test_p[x::y]"]] == ReportedOutcome("failed", "AssertionError: no")
    assert out[ids["test_gone"]] == ReportedOutcome("not in the report", "no such test (pytest ran without it)")
    # a parametrized test named without its parameters: as pytest reports the function
    assert out[ids["test_q"]] == ReportedOutcome("failed", "1 of 2 cases: assert 2 == 3")
    assert out[ids["test_r"]] == ReportedOutcome("passed")


def test_a_missing_pytest_id_and_a_collection_error_are_reasons_not_failures():
    ids = ["tests/python/test_a.py::test_nope", "tests/python/test_a.py::test_ok"]
    log = "no tests ran in 0.41s\nERROR: not found: /tmp/x/repo/tests/python/test_a.py::test_nope\n(no match in any)\n"
    out = mutations.pytest_outcomes(ids, None, log, "pytest exit 4 without a report")
    assert out[ids[0]] == ReportedOutcome("not in the report", "no such test")
    assert out[ids[1]].status == "not in the report"
    assert out[ids[1]].message.startswith("not run: pytest stopped on a missing test id")

    collection = """<testsuites><testsuite name="pytest"><testcase classname="" name="tests.python.test_a">
    <error message="collection failure">ImportError while importing test module
    E   ModuleNotFoundError: No module named 'gone'</error></testcase></testsuite></testsuites>"""
    out = mutations.pytest_outcomes(ids[1:], collection, "")
    assert out[ids[1]] == ReportedOutcome(
        "not in the report", "collection error: tests.python.test_a: ImportError while importing test module")
    result, detail = mutations.classify(out)
    assert result == "error" and "collection error" in detail


def make_testthat_report(rows, **session):
    return json.dumps({"tests": [dict(zip(("file", "test", "status", "message"), row)) for row in rows],
                       "session": session})


def test_each_testthat_outcome_is_read_from_the_driver_report():
    report = make_testthat_report([
        ("test-b.R", "passes", "passed", ""),
        ("test-b.R", "fails", "failed", "levels(pred$class) not identical to sizes"),
        ("test-b.R", "errors", "errored", "object 'x' not found"),
        ("test-b.R", "skips", "skipped", "no Python"),
        ("test-c.R", "(code run outside of `test_that()`)", "errored", "could not find function \"helper\""),
    ])
    ids = [f"tests/testthat/test-b.R::{name}" for name in ("passes", "fails", "errors", "skips", "absent")]
    ids += ["tests/testthat/test-c.R::anything", "tests/testthat/test-d.R::x"]
    existing = {"tests/testthat/test-b.R", "tests/testthat/test-c.R"}
    out = mutations.testthat_outcomes(ids, report, existing_files=existing)
    assert [out[i].status for i in ids[:4]] == ["passed", "failed", "errored", "skipped"]
    assert out[ids[1]].message == "levels(pred$class) not identical to sizes"
    assert out[ids[4]] == ReportedOutcome("not in the report", "no such test in the file")
    assert out[ids[5]] == ReportedOutcome("not in the report",
                                      "the file stopped outside its tests: could not find function \"helper\"")
    assert out[ids[6]] == ReportedOutcome("not in the report", "no such test file")
    timed_out = mutations.testthat_outcomes(ids[:1], None, "timed out after 1200 s", existing)
    assert timed_out[ids[0]] == ReportedOutcome("not in the report", "timed out after 1200 s")


def test_the_R_session_must_have_run_the_scratch_copy(tmp_path):
    root = tmp_path / "repo"
    ours = dict(package_dir=str(root), bridge_dir=str(root / "inst" / "python"),
                core_file=str(root / "python" / "tpuestimator" / "__init__.py"),
                lib_paths=[str(root / ".rlib"), "/usr/lib/R/library"])
    assert mutations.session_problems(root, ours, installed=True) == ""
    theirs = dict(ours, bridge_dir="/usr/local/lib/R/site-library/tpuestimatorr/python",
                  core_file="/work/main/python/tpuestimator/__init__.py", lib_paths=["/usr/lib/R/library"])
    problems = mutations.session_problems(root, theirs, installed=True)
    assert "the R bridge came from /usr/local/lib/R/site-library" in problems
    assert "the Python core came from /work/main/python" in problems
    assert "child R processes would not use .rlib" in problems


def test_testthat_filter_selects_exactly_the_named_files():
    pattern = mutations.testthat_filter(["tests/testthat/test-tables.R", "tests/testthat/test-runs.R"])
    assert pattern == "^(tables|runs)$"   # test-tables-flags.R is not selected
    assert mutations.testthat_filter(["tests/testthat/test-a.b.R"]) == r"^(a\.b)$"


@pytest.mark.parametrize("statuses, expected", [
    (["failed", "errored"], ("caught", "")),
    (["failed", "passed"], ("partly", "passed: test_x.py::t1")),
    (["passed", "skipped"], ("MISSED", "passed: test_x.py::t0, test_x.py::t1 (skipped)")),
    (["failed", "setup error"], ("error", "test_x.py::t1: setup error (m1)")),
    (["failed", "not in the report"], ("error", "test_x.py::t1: not in the report (m1)")),
])
def test_caught_only_when_every_named_test_failed(statuses, expected):
    outcomes = {f"tests/python/test_x.py::t{i}": ReportedOutcome(s, f"m{i}" if s not in ("passed", "failed") else "")
                for i, s in enumerate(statuses)}
    assert mutations.classify(outcomes) == expected


def test_a_test_that_does_not_pass_unmutated_is_named_by_the_baseline():
    tests = ["tests/python/test_x.py::ok", "tests/testthat/test-y.R::broken"]
    outcomes = {tests[0]: ReportedOutcome("passed"), tests[1]: ReportedOutcome("failed", "1 != 2")}
    assert mutations.baseline_failures(tests[:1], outcomes) == ""
    assert mutations.baseline_failures(tests, outcomes) == "test-y.R::broken: failed (1 != 2)"


def test_end_to_end_on_a_tiny_repository(tmp_path):
    """The whole runner on a git repository of two modules and four tests: caught, partly, MISSED,
    target not found, a missing test id, a test that fails unmutated, a mutant that does not import
    and one whose test fails on an import; the working tree untouched."""
    repo = tmp_path / "tiny"
    shutil.copy(SCRIPT, write(repo / "scripts" / "mutations.py", ""))
    module = write(repo / "python" / "tiny" / "__init__.py", "def add(a, b):\n    return a + b\n\n\nLIMIT = 3\n")
    write(repo / "tests" / "python" / "test_tiny.py", textwrap.dedent("""\
        from tiny import LIMIT, add

        def test_add():
            assert add(2, 3) == 5

        def test_positive():
            assert add(2, 3) > 0

        def test_limit():
            assert LIMIT == 4

        def test_helper():
            from tiny.more import helper
            assert helper() == 1
        """))
    write(repo / "python" / "tiny" / "more.py", "def helper():\n    return 1\n")
    entry = "## {key}. {title}\n\nTests: {tests}\n\n```find\n{find}\n```\n\n```replace\n{replace}\n```\n\n"
    ids = {name: f"`tests/python/test_tiny.py::{name}`" for name in ("test_add", "test_positive", "test_limit", "test_helper")}
    write(repo / "tests" / "MUTATIONS.md", "# Mutations\n\n" + "".join(entry.format(**e) for e in [
        dict(key="M1", title="Subtracts", tests=ids["test_add"], find="    return a + b", replace="    return a - b"),
        dict(key="M2", title="Off by one", tests=ids["test_add"] + " " + ids["test_positive"],
             find="    return a + b", replace="    return a + b + 1"),
        dict(key="M3", title="Still positive", tests=ids["test_positive"],
             find="    return a + b", replace="    return a + b + 1"),
        dict(key="M4", title="Moved", tests=ids["test_add"], find="return a * b", replace="return 0"),
        dict(key="M5", title="No such test", tests="`tests/python/test_tiny.py::test_gone`",
             find="    return a + b", replace="    return 0"),
        dict(key="M6", title="Broken unmutated", tests=ids["test_limit"], find="LIMIT = 3", replace="LIMIT = 5"),
        dict(key="M7", title="Does not import", tests=ids["test_add"], find="LIMIT = 3", replace="LIMIT = = 3"),
        dict(key="M8", title="Renamed", tests=ids["test_helper"], find="def helper():", replace="def helpers():"),
    ]))
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    proc = subprocess.run([sys.executable, str(repo / "scripts" / "mutations.py")], cwd=repo,
                          capture_output=True, text=True, timeout=120)
    rows = {line.split("|")[1].strip(): [cell.strip() for cell in line.split("|")[1:-1]]
            for line in proc.stdout.splitlines() if line.startswith("| M")}
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert {key: row[3] for key, row in rows.items()} == {
        "M1": "caught", "M2": "partly", "M3": "MISSED", "M4": "target not found", "M5": "error", "M6": "error",
        "M7": "error", "M8": "error"}, \
        proc.stdout + proc.stderr
    assert rows["M1"][2] == "python/tiny/__init__.py"
    assert rows["M2"][5] == "passed: test_tiny.py::test_positive"
    assert rows["M5"][5].startswith("fails unmutated: test_tiny.py::test_gone: not in the report (no such test")
    assert rows["M6"][5].startswith("fails unmutated: test_tiny.py::test_limit: failed (assert 3 == 4")
    assert rows["M7"][5].startswith("the mutant does not import: SyntaxError"), rows["M7"]
    assert rows["M8"][5].startswith("failed on an import, not on behaviour: test_tiny.py::test_helper (ImportError"), rows["M8"]
    assert "1 of 8 caught" in proc.stdout
    assert module.read_text() == "def add(a, b):\n    return a + b\n\n\nLIMIT = 3\n"   # the scratch copy took the breaks

    listed = subprocess.run([sys.executable, str(repo / "scripts" / "mutations.py"), "--list", "--only", "M2"],
                            cwd=repo, capture_output=True, text=True, check=True).stdout
    assert listed == ("M2. Off by one\n    tests/python/test_tiny.py::test_add\n"
                      "    tests/python/test_tiny.py::test_positive\n")


def test_the_scratch_copy_holds_tracked_and_untracked_files_keeps_relative_links_and_skips_rlib(tmp_path):
    repo, dest = tmp_path / "repo", tmp_path / "scratch"
    write(repo / "python" / "schema.json", "{}\n")
    (repo / "inst").mkdir()
    (repo / "inst" / "schema.json").symlink_to(Path("..") / "python" / "schema.json")
    write(repo / "R" / "new.R", "x <- 1\n")                             # untracked, not ignored
    write(repo / ".rlib" / "tpuestimatorr" / "DESCRIPTION", "installed\n")   # someone's private library
    write(repo / "build" / "junk.txt", "ignored\n")
    write(repo / ".gitignore", "build/\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "python", "inst", ".gitignore"], cwd=repo, check=True)
    (repo / "python" / "gone.py").touch()
    subprocess.run(["git", "add", "python/gone.py"], cwd=repo, check=True)
    (repo / "python" / "gone.py").unlink()                             # deleted, still in the index
    mutations.scratch_copy(dest, repo)
    copied = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file() or p.is_symlink())
    assert copied == [".gitignore", "R/new.R", "inst/schema.json", "python/schema.json"]
    assert (dest / "inst" / "schema.json").is_symlink()
    (dest / "python" / "schema.json").write_text('{"broken": true}\n')
    assert (dest / "inst" / "schema.json").read_text() == '{"broken": true}\n'
    assert (repo / "inst" / "schema.json").read_text() == "{}\n"


def test_a_test_runs_leftovers_in_sessions_of_their_own_are_stopped(tmp_path):
    """A process a test run started in a session of its own (as a local cluster's tasks are)
    escapes the run's process group: the runner finds it by its mark in the environment. A
    mutant that breaks stopping a cluster's tasks (M604) left one training after its run."""
    runner = mutations.Runner(tmp_path, tmp_path)
    pid_file = tmp_path / "pid"
    script = ("import subprocess, sys\n"
              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True)\n"
              f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n")
    code, _ = runner._run([sys.executable, "-c", script], tmp_path / "run.log")
    assert code == 0, (tmp_path / "run.log").read_text()
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 10  # SIGKILL is sent, not waited for
    while True:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            state = "gone"
        if state in ("gone", "Z") or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if state not in ("gone", "Z"):  # the test's own clean-up: nothing left running after it fails
        os.kill(pid, signal.SIGKILL)
    assert state in ("gone", "Z"), f"the detached child {pid} is still running (state {state})"
