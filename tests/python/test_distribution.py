"""The two ways users install tpuestimator, end to end, each into a fresh virtualenv.

- Python: `python -m build` makes a wheel (not the editable install of the checkout); the
  wheel goes into a new virtualenv; without TensorFlow the CLI names the missing extra; with
  the `cpu` extra it runs the main job on the bundled digits example from the wheel's own
  package data (schema, example config and TFRecords).
- R: `R CMD build` makes the tarball, `R CMD INSTALL` installs it into a new library, then
  `install_tpuestimator()` installs the checkout's sources into the `r-tpuestimator` virtualenv
  (made by the test: its `reticulate::virtualenv_create()` branch is not run here) and, in a new
  R process as its message asks, `tpu_train()` trains the bundled example.

TensorFlow is not installed a second time (that took about 30 CPU-s and 35 s per test): the new
virtualenvs see the running venv's third-party packages through a .pth file (`_share_packages`),
never its tpuestimator, so pip finds the `cpu` extra already satisfied, and what is imported as
tpuestimator is only what the wheel (or the R path's build of the checkout) installed there.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
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


# Left out of the shared view: tpuestimator itself (the copy under test must be the only one), the
# .pth files (an editable install of the checkout is one) and the build tools: pip's isolated
# build of the checkout (the R path) would find this venv's older setuptools before its own.
NOT_SHARED = ("tpuestimator", "__editable__", "setuptools", "pkg_resources", "_distutils_hack", "distutils")


def _share_packages(venv: Path) -> None:
    """Lets `venv` import the running venv's third-party packages (TensorFlow and its
    dependencies), as a venv made with --system-site-packages sees the system's: a folder of links
    to them (beside `venv`), less NOT_SHARED, named by a .pth file. Packages installed in `venv` come
    first."""
    shared = venv.parent / f"{venv.name}-shared-packages"
    shared.mkdir()
    for site_dir in dict.fromkeys(Path(sysconfig.get_path(kind)) for kind in ("purelib", "platlib")):
        for entry in site_dir.iterdir():
            if not entry.name.startswith(NOT_SHARED) and entry.suffix != ".pth" and entry.name != "__pycache__":
                if not (shared / entry.name).exists():
                    (shared / entry.name).symlink_to(entry)
    purelib = next(venv.glob("lib/python3*/site-packages"))
    (purelib / "shared_packages.pth").write_text(f"{shared}\n")


def _pip(venv: Path, *args, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    """pip (this venv's) installing into `venv`, made without pip (ensurepip cost about 7 CPU-s);
    no byte-compiling: the few modules a run imports are compiled when imported."""
    return _run([sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "-q", "--no-compile",
                 *args], cwd=cwd, env=env)


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
    _run([_base_python(), "-m", "venv", "--without-pip", venv], cwd=tmp_path, env=_clean_env())
    py, cli = venv / "bin" / "python", venv / "bin" / "tpuestimator"
    env = _clean_env(PATH=f"{venv / 'bin'}{os.pathsep}{_clean_env()['PATH']}")
    _pip(venv, wheel, cwd=tmp_path, env=env)   # with the dependencies it declares, from the index
    # Tables (data frames, `tpuestimator data write table.csv`) need pandas: a declared dependency,
    # not only a test extra (a default install crashed reading a CSV table).
    _run([py, "-c", "import pandas"], cwd=tmp_path, env=env)

    # No TensorFlow yet: the bare install works up to the first TensorFlow use, then names the extra.
    _run([cli, "example", "digits", "--out", "digits"], cwd=tmp_path, env=env)
    bare = subprocess.run([cli, "train", "digits/digits.yaml"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert bare.returncode == 2, bare.stderr
    assert "TensorFlow is not installed" in bare.stderr and "tpuestimator[cpu]" in bare.stderr
    assert not (tmp_path / "runs").exists() and not (tmp_path / "models").exists(), "the refusal wrote something"

    # The cpu extra: pip resolves it against the shared TensorFlow (installing only what is missing).
    _share_packages(venv)
    _pip(venv, f"{wheel}[cpu]", cwd=tmp_path, env=env)
    where = _run([py, "-c", "import tpuestimator; print(tpuestimator.__file__)"], cwd=tmp_path, env=env).stdout
    assert where.strip().startswith(str(venv / "lib")), f"tpuestimator imported from {where}, not from the wheel"

    # The main job (train, evaluate, export, record), shortened: the full one runs in test_main_command.
    # 100 steps reach about 0.94 (chance is 0.1): the wheel's TFRecords are the real data.
    out = _run([cli, "train", "digits/digits.yaml", "--set", "train.max_steps=100"], cwd=tmp_path, env=env).stdout
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
    venv = tmp_path / "virtualenvs" / "r-tpuestimator"
    # docs/getting-started-r.md's install block, as written (R_LIBS points R CMD INSTALL at the
    # scratch library): from the clone, then the tarball it builds
    from test_docs_blocks import as_run, page_block

    (tmp_path / "rlib").mkdir()
    _, block = page_block("getting-started-r.md", "R CMD INSTALL .")
    installs = _run(["bash", "-c", "set -euo pipefail\n" + as_run("getting-started-r.md:install", block)], cwd=src, env=env)
    assert (installs.stdout + installs.stderr).count("DONE (tpuestimatorr)") == 2, installs.stderr[-3000:]
    assert (src / "tpuestimatorr_0.1.0.tar.gz").is_file()
    assert (tmp_path / "rlib" / "tpuestimatorr" / "DESCRIPTION").is_file()

    # The virtualenv is made here, seeing TensorFlow through _share_packages; install_tpuestimator()
    # finds it and installs into it (reticulate::virtualenv_create, which it calls for a new one,
    # is left out: with pip, numpy and a second TensorFlow it cost about 50 CPU-s).
    _run([_base_python(), "-m", "venv", "--without-pip", venv], cwd=tmp_path, env=env)
    _share_packages(venv)
    # install_tpuestimator() finds the Python sources in the working folder (a checkout), as a
    # user who cloned the repository and built the R package would run it.
    installed = _run(["Rscript", "-e", "library(tpuestimatorr); install_tpuestimator(extra = 'cpu')"],
                     cwd=src, env=env)
    assert "Installed tpuestimator into r-tpuestimator" in installed.stderr, installed.stderr[-2000:]
    assert list(venv.glob("lib/python3*/site-packages/tpuestimator/__init__.py")), "it installed nothing into the venv"

    # A new R session finds that virtualenv on its own and trains the bundled example (no export:
    # its SavedModel, about 3 CPU s, is the wheel test's; this one is about finding the virtualenv).
    script = r"""
library(tpuestimatorr)
run <- tpu_train(tpu_example("digits", dir = "digits"), train.max_steps = 50L, verbose = FALSE, export = FALSE)
cat("PYTHON=", reticulate::py_config()$python, "\n", sep = "")
cat("MODULE=", reticulate::import("tpuestimator")$`__file__`, "\n", sep = "")
cat("STEP=", run$global_step, "\n", sep = "")
cat("RUN=", run$run_dir, "\n", sep = "")
"""
    work = tmp_path / "work"
    work.mkdir()
    out = _run(["Rscript", "-e", script], cwd=work, env=env, timeout=900).stdout
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert values["PYTHON"].startswith(str(venv)), out
    assert values["MODULE"].startswith(str(venv / "lib")), out
    assert int(float(values["STEP"])) == 50
    assert (Path(values["RUN"]) / "tfruns.d" / "evaluation.json").is_file()
