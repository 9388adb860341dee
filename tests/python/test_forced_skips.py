"""CI runs with TPUESTIMATOR_FORCE_TESTS=1: no test may be skipped there (conftest.py). Both
kinds of skip are checked on scratch test files run by a pytest session of their own with
this suite's conftest as a plugin: a skip inside a test, and a whole file skipped while it is
collected (a module-level `pytest.importorskip`, as test_data_beam.py has), which pytest
reports as a skipped collection rather than as skipped tests.

The session runs in this process (pytester's `runpytest_inprocess`: its own config, plugins,
collection and exit code; the conftest's TensorFlow set-up finds TensorFlow started already),
not in a child pytest, which would start TensorFlow again for each of the four runs."""
from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

SKIPPED_FILE = """import pytest
pytest.importorskip("tpuestimator_no_such_module")


def test_never_runs():
    pass
"""
SKIPPED_TEST = """import pytest


def test_skips_itself():
    pytest.skip("no device here")


def test_passes():
    pass
"""


def run_child(pytester, monkeypatch, source: str, force: bool):
    """(exit code, stdout + stderr) of a pytest session over `source` with this suite's conftest."""
    pytester.makepyfile(test_scratch=source)
    if force:
        monkeypatch.setenv("TPUESTIMATOR_FORCE_TESTS", "1")
    else:
        monkeypatch.delenv("TPUESTIMATOR_FORCE_TESTS", raising=False)
    # -p conftest: this suite's conftest.py (imported as `conftest`) as a plugin of a run outside the suite
    result = pytester.runpytest_inprocess("-p", "conftest", "-p", "no:cacheprovider", "-q",
                                          "--rootdir", str(pytester.path), str(pytester.path / "test_scratch.py"))
    return int(result.ret), "\n".join(result.outlines + result.errlines)


@pytest.mark.parametrize("force", [False, True], ids=["plain", "forced"])
def test_a_file_skipped_while_collected_fails_when_forced(pytester, monkeypatch, force):
    returncode, out = run_child(pytester, monkeypatch, SKIPPED_FILE, force)
    if not force:
        # the hollow spot: alone it exits 5 (no tests), beside other files 0, and CI passed
        assert returncode in (0, 5) and "1 skipped" in out, out
        return
    assert returncode not in (0, 5), out
    assert "skipped while collected under TPUESTIMATOR_FORCE_TESTS=1" in out, out
    assert "tpuestimator_no_such_module" in out, out   # the reason is kept
    assert "skipped" not in out.splitlines()[-1], out   # the summary line counts an error, not a skip


@pytest.mark.parametrize("force", [False, True], ids=["plain", "forced"])
def test_a_test_that_skips_itself_fails_when_forced(pytester, monkeypatch, force):
    returncode, out = run_child(pytester, monkeypatch, SKIPPED_TEST, force)
    if not force:
        assert returncode == 0 and "1 passed, 1 skipped" in out, out
        return
    assert returncode == 1 and "1 failed, 1 passed" in out, out
    assert "no device here" in out, out
