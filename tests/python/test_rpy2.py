"""Runs tests/python/rpy2_cases.py (R embedded through rpy2) in a fresh Python process.

R, embedded by rpy2, reaches Python back through reticulate; it must start in a clean
interpreter: TensorFlow state left by earlier tests in this process (Debugger V2 dump
callbacks in particular) aborts an embedded R. Skips without rpy2; with
TPUESTIMATOR_FORCE_TESTS=1 (CI) a missing rpy2 is a failure.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def test_r_package_driven_through_rpy2(python_env):
    try:
        import rpy2.rinterface  # noqa: F401
    except Exception as exc:  # ImportError, or R not found by rpy2
        message = f"rpy2 is not importable ({type(exc).__name__}: {exc}); pip install rpy2==3.5.17"
        if os.environ.get("TPUESTIMATOR_FORCE_TESTS") == "1":
            pytest.fail(f"TPUESTIMATOR_FORCE_TESTS=1: {message}")
        pytest.skip(message)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
                           str(HERE / "rpy2_cases.py")], cwd=HERE.parents[1], env=python_env,
                          capture_output=True, text=True, timeout=900)
    summary = proc.stdout[-3000:]
    assert proc.returncode == 0, summary + proc.stderr[-3000:]
    assert "3 passed" in summary, summary
