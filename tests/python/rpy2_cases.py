"""The R package driven from Python through rpy2, on the shared parity fixture (run by test_rpy2.py in a fresh process).

Trains tests/fixtures/parity/parity.yaml through `tpuestimatorr::tpu_train()` (R, embedded in
this Python process by rpy2; R reaches this same interpreter through reticulate) and through
`tpuestimator.jobs.job.run_job()`, and compares the final eval loss.

Needs rpy2 (`pip install rpy2==3.5.17`, which builds against R: r-base-dev) and R with
reticulate. The R package is installed with `R CMD INSTALL` into a temporary library, unless
TPUESTIMATORR_R_LIB names a library that already holds it (CI installs it first).
Skips when rpy2 is missing; with TPUESTIMATOR_FORCE_TESTS=1 (CI) that is a failure.
"""
from __future__ import annotations

import atexit
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(os.environ.get("TPUESTIMATOR_FIXTURES") or REPO / "tests" / "fixtures")
PARITY = FIXTURES / "parity" / "parity.yaml"
FORCE = os.environ.get("TPUESTIMATOR_FORCE_TESTS") == "1"


def _require_rpy2():
    try:
        import rpy2.rinterface
        import rpy2.robjects  # noqa: F401
    except Exception as exc:  # ImportError, or R not found by rpy2
        message = f"rpy2 is not importable ({type(exc).__name__}: {exc}); pip install rpy2==3.5.17"
        if FORCE:
            pytest.fail(f"TPUESTIMATOR_FORCE_TESTS=1: {message}")
        pytest.skip(message)
    # rpy2 ends R at exit with the GIL released while reticulate's finalizers touch Python
    # objects ("PyThreadState_Get: the GIL is released"): leave R to the process exit instead.
    atexit.unregister(rpy2.rinterface.endr)
    return rpy2.robjects


@pytest.fixture(scope="module")
def r_session(tmp_path_factory):
    """An embedded R with tpuestimatorr loaded, reaching this Python through reticulate."""
    os.environ["TPUESTIMATORR_PYTHON"] = sys.executable
    os.environ["RETICULATE_PYTHON"] = sys.executable
    ro = _require_rpy2()
    lib = os.environ.get("TPUESTIMATORR_R_LIB")
    if not lib:
        r_exe = shutil.which("R")
        if r_exe is None:
            pytest.fail("R is not on PATH") if FORCE else pytest.skip("R is not on PATH")
        lib = str(tmp_path_factory.mktemp("rlib"))
        done = subprocess.run([r_exe, "CMD", "INSTALL", "--no-test-load", "--no-docs", "--no-multiarch",
                               f"--library={lib}", str(REPO)], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"R CMD INSTALL failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    ro.r(f".libPaths(c({_r_str(lib)}, .libPaths()))")
    ro.r("suppressPackageStartupMessages(library(tpuestimatorr))")
    return ro


def _r_str(value: str) -> str:
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def test_r_package_reaches_this_python(r_session):
    ro = r_session
    assert bool(ro.r("tpuestimator_available()")[0])
    python = str(ro.r("reticulate::py_config()$python")[0])
    assert Path(python).resolve() == Path(sys.executable).resolve()
    # the same interpreter: a value set here is visible from R
    import builtins

    builtins._tpuestimatorr_marker = 1234
    assert int(ro.r("reticulate::py_eval('__import__(\"builtins\")._tpuestimatorr_marker')")[0]) == 1234


def test_config_error_is_an_r_condition_naming_the_field(r_session):
    ro = r_session
    field = ro.r(f"""
      err <- tryCatch(tpu_config({_r_str(PARITY)}, train.batch_size = 0L),
                      tpuestimator_config_error = function(e) e)
      err$field
    """)
    assert str(field[0]) == "train.batch_size"


def test_parity_loss_from_r_equals_python(r_session, tmp_path):
    from tpuestimator.jobs.job import run_job

    ro = r_session
    r_loss = ro.r(f"""
      run <- suppressMessages(tpu_train({_r_str(PARITY)}, model_dir = {_r_str(tmp_path / "models-r")},
                                        runs_dir = {_r_str(tmp_path / "runs")}, verbose = FALSE))
      run$metrics$loss
    """)
    r_loss = float(r_loss[0])
    py = run_job(str(PARITY), model_dir=str(tmp_path / "models-py"), runs_dir=str(tmp_path / "runs"))
    py_loss = float(py.metrics["loss"])
    assert math.isfinite(r_loss) and math.isfinite(py_loss)
    assert abs(r_loss - py_loss) < 1e-5, (r_loss, py_loss)
    # both runs are listed by the R reader
    n = ro.r(f"nrow(tpu_ls_runs({_r_str(tmp_path / 'runs')}))")
    assert int(n[0]) == 2
