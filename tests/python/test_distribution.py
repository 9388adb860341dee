"""The two ways users install tpuestimator, end to end, each into a fresh virtualenv.

- Python: `python -m build` makes a wheel (not the editable install of the checkout); the
  wheel goes into a new virtualenv; without TensorFlow the CLI names the missing extra; with
  the `cpu` extra it runs the main job on the bundled digits example from the wheel's own
  package data (schema, example config and TFRecords).
- R: `R CMD build` makes the tarball, `R CMD INSTALL` installs it into a new library, then
  `install_tpuestimator()` creates the virtualenv from the checkout's sources and, in a new R
  process as its message asks, `tpu_train()` trains the bundled example.

Both download TensorFlow's CPU wheel from the package index (about 35 s each here).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _clean_env(**extra: str) -> dict:
    """The environment of a new user's shell: nothing pointing at this checkout's venv or sources."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "TPUESTIMATORR_PYTHON", "RETICULATE_PYTHON", "VIRTUAL_ENV",
                        "TPUESTIMATOR_SOURCE", "PYTEST_XDIST_WORKER")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(REPO / ".venv")))
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env.update(extra)
    return env


def _run(args, *, cwd, env, timeout=600) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{args} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def _copy_checkout(dest: Path) -> Path:
    """The tracked and new (not ignored) files of this checkout: what a clone has, no .venv, and
    builds write there, not into the checkout other tests are reading."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (REPO / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)
    return dest


def _base_python() -> str:
    """The interpreter the project venv was made from (a venv inside a venv would inherit nothing anyway)."""
    return getattr(sys, "_base_executable", None) or shutil.which("python3")


def test_built_wheel_in_a_fresh_virtualenv_runs_the_main_job(tmp_path):
    dist = tmp_path / "dist"
    # As users build it: an isolated build environment with the setuptools pyproject.toml asks for.
    src = _copy_checkout(tmp_path / "src")
    _run([sys.executable, "-m", "build", "--wheel", "--outdir", dist, src], cwd=tmp_path, env=_clean_env())
    wheel = next(dist.glob("tpuestimator-*.whl"))
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    for data_file in ("tpuestimator/schema/config.schema.json", "tpuestimator/examples/digits/train.tfrecord",
                      "tpuestimator/examples/digits/eval.tfrecord", "tpuestimator/examples/digits/digits.yaml"):
        assert data_file in names, f"{data_file} missing from {wheel.name}"
    assert not [n for n in names if n.startswith(("tests/", "R/", "benchmarks/"))], "the wheel ships only the package"

    venv = tmp_path / "venv"
    _run([_base_python(), "-m", "venv", venv], cwd=tmp_path, env=_clean_env())
    py, cli = venv / "bin" / "python", venv / "bin" / "tpuestimator"
    env = _clean_env(PATH=f"{venv / 'bin'}{os.pathsep}{_clean_env()['PATH']}")
    _run([py, "-m", "pip", "install", "-q", wheel], cwd=tmp_path, env=env)

    # No TensorFlow yet: the bare install works up to the first TensorFlow use, then names the extra.
    _run([cli, "example", "digits", "--out", "digits"], cwd=tmp_path, env=env)
    bare = subprocess.run([cli, "train", "digits/digits.yaml"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert bare.returncode == 2, bare.stderr
    assert "TensorFlow is not installed" in bare.stderr and "tpuestimator[cpu]" in bare.stderr
    assert not (tmp_path / "runs").exists() and not (tmp_path / "models").exists(), "the refusal wrote something"

    _run([py, "-m", "pip", "install", "-q", f"{wheel}[cpu]"], cwd=tmp_path, env=env)
    where = _run([py, "-c", "import tpuestimator; print(tpuestimator.__file__)"], cwd=tmp_path, env=env).stdout
    assert where.strip().startswith(str(venv)), f"tpuestimator imported from {where}, not from the wheel"

    # The main job (train, evaluate, export, record), shortened: the full one runs in test_main_command.
    out = _run([cli, "train", "digits/digits.yaml", "--set", "train.max_steps=300"], cwd=tmp_path, env=env).stdout
    accuracy = float(next(line.split()[1] for line in out.splitlines() if line.strip().startswith("accuracy")))
    assert accuracy >= 0.8, out
    export = next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("export:"))
    assert (tmp_path / export / "saved_model.pb").is_file()
    runs = json.loads(_run([cli, "runs", "ls", "--json"], cwd=tmp_path, env=env).stdout)
    assert len(runs) == 1, runs
    _run([cli, "runs", "ls", "--check"], cwd=tmp_path, env=env)  # every tfruns format rule holds


@pytest.mark.skipif(shutil.which("R") is None, reason="R is not installed (scripts/setup_system.sh r)")
def test_r_tarball_install_tpuestimator_then_tpu_train(tmp_path):
    src = _copy_checkout(tmp_path / "src")      # as scripts/r_check.sh builds: no .venv in the tarball
    env = _clean_env(WORKON_HOME=str(tmp_path / "virtualenvs"), R_LIBS=str(tmp_path / "rlib"))
    _run(["R", "CMD", "build", "--no-build-vignettes", src], cwd=tmp_path, env=env)
    tarball = next(tmp_path.glob("tpuestimatorr_*.tar.gz"))
    (tmp_path / "rlib").mkdir()
    _run(["R", "CMD", "INSTALL", "--no-test-load", "-l", tmp_path / "rlib", tarball], cwd=tmp_path, env=env)

    # install_tpuestimator() finds the Python sources in the working folder (a checkout), as a
    # user who cloned the repository and built the R package would run it.
    installed = _run(["Rscript", "-e", "library(tpuestimatorr); install_tpuestimator(extra = 'cpu')"],
                     cwd=src, env=env)
    assert "Installed tpuestimator into r-tpuestimator" in installed.stderr, installed.stderr[-2000:]
    venv_python = tmp_path / "virtualenvs" / "r-tpuestimator" / "bin" / "python"
    assert venv_python.exists()

    # A new R session finds that virtualenv on its own and trains the bundled example.
    script = r"""
library(tpuestimatorr)
run <- tpu_train(tpu_example("digits", dir = "digits"), train.max_steps = 200L, verbose = FALSE)
cat("PYTHON=", reticulate::py_config()$python, "\n", sep = "")
cat("MODULE=", reticulate::import("tpuestimator")$`__file__`, "\n", sep = "")
cat("STEP=", run$global_step, "\n", sep = "")
cat("RUN=", run$run_dir, "\n", sep = "")
"""
    work = tmp_path / "work"
    work.mkdir()
    out = _run(["Rscript", "-e", script], cwd=work, env=env, timeout=900).stdout
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert values["PYTHON"].startswith(str(tmp_path / "virtualenvs" / "r-tpuestimator")), out
    assert values["MODULE"].startswith(str(tmp_path / "virtualenvs" / "r-tpuestimator")), out
    assert int(float(values["STEP"])) == 200
    assert (Path(values["RUN"]) / "tfruns.d" / "evaluation.json").is_file()
