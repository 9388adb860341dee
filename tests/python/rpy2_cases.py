"""The R package driven from Python through rpy2, on the shared parity fixture (run by test_rpy2.py in a fresh process).

Trains tests/fixtures/parity/parity.yaml through `tpuestimatorr::tpu_train()` (R, embedded in
this Python process by rpy2; R reaches this same interpreter through reticulate) and through
`tpuestimator.jobs.job.run_job()`, and compares the final eval loss.

Needs rpy2 (`pip install rpy2==3.5.17`, which builds against R: r-base-dev) and R with
reticulate. The R package is installed with `R CMD INSTALL` into a temporary library, unless
TPUESTIMATORR_R_LIB names a library that already holds it (CI installs it first).
Skips when rpy2 is missing; with TPUESTIMATOR_FORCE_TESTS=1 (CI) that is a failure.

Every piece of R here runs through `GilHeldR`, never `rpy2.robjects.r(...)` directly: rpy2
calls R with the GIL released (cffi does so around every C call), and reticulate 1.28 (Debian's)
drops its references to Python objects from R's garbage-collection finalizer without taking the
GIL. When such a drop frees a dict, Python aborts ("PyThreadState_Get: the function must be
called with the GIL held"). Whether a collection lands there is chance: the parity test aborted
every time after an unrelated module split moved allocations. Evaluating R through
`R_tryEval` from ctypes.PyDLL keeps the GIL held for the whole evaluation (reticulate's own
GIL scope then nests), and a `gc()` at its end frees what the evaluation left unreachable
while the GIL is still held.
"""
from __future__ import annotations

import atexit
import ctypes
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


class GilHeldR:
    """Evaluates R code in the embedded R with the GIL held (see the module docstring).

    `eval(code)` returns the value as an rpy2 object; an R error becomes an AssertionError
    with R's message. The wrapper `{...}` is parsed once; the code travels in a global variable.
    """

    def __init__(self, ro):
        import rpy2.rinterface as ri
        import rpy2.situation
        from rpy2.rinterface_lib import openrlib

        self._ri = ri
        self._ffi = openrlib.ffi
        lib = ctypes.PyDLL(str(Path(rpy2.situation.get_r_home()) / "lib" / "libR.so"))
        self._try_eval = lib.R_tryEval
        self._try_eval.restype = ctypes.c_void_p
        self._try_eval.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
        self._global_env = ctypes.c_void_p.in_dll(lib, "R_GlobalEnv")
        # One call: evaluate, keep the value or the error message, then collect while the
        # GIL is still held so that reticulate's finalizers run safely.
        self._call = ri.parse(
            "{ .tpe_out <- tryCatch(list(ok = TRUE, value = eval(parse(text = .tpe_code), globalenv())),"
            " error = function(e) list(ok = FALSE, value = conditionMessage(e)));"
            " rm(.tpe_code, envir = globalenv()); invisible(gc(verbose = FALSE)); NULL }")[0]

    def _address(self, sexp) -> int:
        return int(self._ffi.cast("uintptr_t", sexp.__sexp__._cdata))

    def eval(self, code: str):
        ri = self._ri
        ri.globalenv[".tpe_code"] = ri.StrSexpVector([code])
        failed = ctypes.c_int(0)
        self._try_eval(self._address(self._call), self._global_env, ctypes.byref(failed))
        assert failed.value == 0, f"R_tryEval failed outside the tryCatch while running:\n{code}"
        out = ri.globalenv.find(".tpe_out")
        ok, value = bool(out[0][0]), out[1]
        if not ok:
            raise AssertionError(f"R error: {value[0]}\nwhile running:\n{code}")
        return value


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
    r = GilHeldR(ro)
    r.eval(f".libPaths(c({_r_str(lib)}, .libPaths()))")
    r.eval("suppressPackageStartupMessages(library(tpuestimatorr))")
    return r


def _r_str(value: str) -> str:
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def test_r_package_reaches_this_python(r_session):
    r = r_session
    assert bool(r.eval("tpuestimator_available()")[0])
    python = str(r.eval("reticulate::py_config()$python")[0])
    # the interpreter binary this process runs: test_rpy2.py runs the cases in a fork of conftest's
    # fork server, whose sys.executable is the launcher (a fresh `python`'s is the venv's link)
    assert Path(python).resolve() == Path("/proc/self/exe").resolve()
    # the same interpreter: a value set here is visible from R
    import builtins

    builtins._tpuestimatorr_marker = 1234
    assert int(r.eval("reticulate::py_eval('__import__(\"builtins\")._tpuestimatorr_marker')")[0]) == 1234


def test_config_error_is_an_r_condition_naming_the_field(r_session):
    r = r_session
    field = r.eval(f"""
      err <- tryCatch(tpu_config({_r_str(PARITY)}, train.batch_size = 0L),
                      tpuestimator_config_error = function(e) e)
      err$field
    """)
    assert str(field[0]) == "train.batch_size"


def test_parity_loss_from_r_equals_python(r_session, tmp_path):
    from tpuestimator.jobs.job import run_job

    r = r_session
    r_loss = r.eval(f"""
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
    n = r.eval(f"nrow(tpu_ls_runs({_r_str(tmp_path / 'runs')}))")
    assert int(n[0]) == 2
