"""The set-up scripts behind the README's two commands: order of steps and clear refusals.

A fresh machine once failed because rpy2 (the Python `r` extra) was built before R was
installed; CI stayed green only because R was already there. These tests keep the order and
each script's refusal messages from regressing unseen.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _plan() -> list[list[str]]:
    out = subprocess.run(["bash", "scripts/test.sh", "--plan"], cwd=REPO, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    return [line.split(": ", 2)[2].split() for line in out.splitlines() if line.startswith("== set-up: ")]


def test_test_command_installs_r_before_what_builds_against_it():
    steps = _plan()
    scripts = [step[1] for step in steps]
    system = next(i for i, s in enumerate(steps) if s[1] == "scripts/setup_system.sh" and "r" in s[2:])
    python_r = next(i for i, s in enumerate(steps) if s[1] == "scripts/setup_python.sh" and "r" in s[2:])
    r_package = scripts.index("scripts/setup_r.sh")
    assert system < python_r < r_package, steps
    # The Debian packages the test suite needs beyond R: chromium (report tests), lintr (lint),
    # Fashion-MNIST (the fashion_mnist example's tests).
    assert {"browser", "lint", "python", "datasets"} <= set(steps[system][2:])


def test_main_command_needs_no_r():
    main = (REPO / "scripts" / "main.sh").read_text()
    setup = [line.strip() for line in main.splitlines() if "scripts/setup_" in line]
    assert setup == ["bash scripts/setup_python.sh"], setup   # no extras: no rpy2, no R


def _path_without(*programs: str, tmp_path: Path) -> str:
    """PATH with every folder's programs except `programs` (linked into one folder)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            target = bin_dir / name
            if name in programs or target.exists() or not os.access(os.path.join(folder, name), os.X_OK):
                continue
            target.symlink_to(os.path.join(folder, name))
    return str(bin_dir)


def _scratch_checkout(tmp_path: Path) -> Path:
    """scripts/ and pyproject.toml in a scratch folder: a script that went too far cannot touch .venv."""
    root = tmp_path / "checkout"
    shutil.copytree(REPO / "scripts", root / "scripts")
    shutil.copy2(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def test_r_extra_without_r_stops_before_pip_and_names_the_fix(tmp_path):
    root = _scratch_checkout(tmp_path)
    env = dict(os.environ, PATH=_path_without("R", "Rscript", tmp_path=tmp_path))
    proc = subprocess.run(["bash", "scripts/setup_python.sh", "dev", "r"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "R is not on PATH" in proc.stderr and "scripts/setup_system.sh r" in proc.stderr
    assert "rpy2" in proc.stderr
    assert not (root / ".venv").exists(), "nothing may be installed before the check"


def test_a_venv_shared_through_a_link_is_never_reinstalled_from_here(tmp_path):
    """A second checkout (a git worktree) whose .venv links to the first one's: when the set-up's
    quick check fails there, `pip install -e .` would re-point the first checkout's editable
    install at this one. The script refuses, naming the link's target and the fix, and runs
    nothing in that venv beyond the check."""
    root = _scratch_checkout(tmp_path)
    shared = tmp_path / "first" / ".venv"
    (shared / "bin").mkdir(parents=True)
    calls = tmp_path / "calls.log"
    stub = shared / "bin" / "python"   # every call logged; the import check fails
    stub.write_text(f"#!/bin/sh\necho \"$*\" >> {calls}\nexit 1\n")
    stub.chmod(0o755)
    (root / ".venv").symlink_to(shared)
    proc = subprocess.run(["bash", "scripts/setup_python.sh", "dev"], cwd=root, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert str(shared.resolve()) in proc.stderr and "shared with another checkout" in proc.stderr
    assert "rm .venv && bash scripts/setup_python.sh dev" in proc.stderr
    ran = calls.read_text().splitlines() if calls.exists() else []
    assert all(line.startswith("-c import tpuestimator") for line in ran), ran   # at most the check, never pip


def test_wrong_python_is_refused_with_the_fix(tmp_path):
    root = _scratch_checkout(tmp_path)
    fake = tmp_path / "python3.9"
    fake.write_text("#!/bin/sh\n[ \"$1\" = --version ] && echo 'Python 3.9.2' && exit 0\nexit 1\n")
    fake.chmod(0o755)
    proc = subprocess.run(["bash", "scripts/setup_python.sh"], cwd=root, env=dict(os.environ, PYTHON=str(fake)),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "needs Python 3.10 or 3.11" in proc.stderr and "Python 3.9.2" in proc.stderr and "PYTHON=" in proc.stderr
    assert not (root / ".venv").exists()


def test_unknown_package_group_is_named():
    proc = subprocess.run(["bash", "scripts/setup_system.sh", "python", "rr"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1 and "unknown package group 'rr'" in proc.stderr and "python, r, browser" in proc.stderr


def _as_nobody(cmd: list[str]) -> list[str]:
    """`cmd` as an unprivileged user (setpriv when the tests run as root)."""
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd] if os.geteuid() == 0 else cmd


def test_installed_groups_need_neither_root_nor_network():
    # Everything the test command needs is installed by now: the script must be a no-op,
    # also for a user who may not apt-get.
    proc = subprocess.run(_as_nobody(["bash", "scripts/setup_system.sh", "python", "r", "browser", "lint",
                                      "datasets"]),
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_missing_package_without_root_names_the_command():
    proc = subprocess.run(_as_nobody(["bash", "scripts/setup_system.sh", "package:tpuestimator-no-such-package"]),
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "needs root" in proc.stderr and "sudo apt-get install tpuestimator-no-such-package" in proc.stderr


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="needs root and unshare to cut the network for one command")
def test_missing_package_without_network_says_so(tmp_path):
    # A private network namespace has no route anywhere: apt-get update fails to fetch. Without
    # apt's retries (Acquire::Retries, 3 by default, each after a longer wait): they cost ~7 s
    # here, and what the script says after the last failed fetch is the same.
    no_retries = tmp_path / "apt.conf"
    no_retries.write_text('Acquire::Retries "0";\n')
    proc = subprocess.run(["unshare", "-n", "bash", "scripts/setup_system.sh", "package:tpuestimator-no-such-package"],
                          cwd=REPO, capture_output=True, text=True, timeout=180,
                          env=dict(os.environ, APT_CONFIG=str(no_retries)))
    assert proc.returncode == 1
    assert "apt-get update failed (no network" in proc.stderr and "tpuestimator-no-such-package" in proc.stderr


# what the stub venv's `pip install` puts in its site folder: the two packages the set-up checks for
STUB_PACKAGES = ("tensorflow", "tpuestimator")


def _stub_venv(root: Path, calls: Path) -> Path:
    """A .venv whose python logs every call: pip 'installs' instantly, putting an empty
    `tensorflow` and `tpuestimator` into the venv's stub site folder, and nothing real is touched,
    while the script's own decisions (reinstall or not, which extras) run as written. Its
    `python -c` runs the script's code for real, in this Python without site-packages and with only
    the stub site folder on its path, so the check that the packages are there sees what a venv
    would. Returns the stub site folder: removing a package from it is `pip uninstall`."""
    (root / ".venv" / "bin").mkdir(parents=True)
    stub = root / ".venv" / "bin" / "python"
    site = root / ".venv" / "stub-site"
    packages = " ".join(str(site / name) for name in STUB_PACKAGES)
    stub.write_text(f"#!/bin/sh\necho \"$*\" >> {calls}\n"
                    f"case \"$*\" in *'pip install'*) for p in {packages}; do mkdir -p $p; "
                    f"echo '__version__ = \"0\"' > $p/__init__.py; done;; esac\n"
                    f"if [ \"$1\" = -c ]; then PYTHONPATH={site} exec {sys.executable} -S -c \"$2\"; fi\nexit 0\n")
    stub.chmod(0o755)
    return site


def _setup(root: Path, calls: Path, *extras: str) -> list[str]:
    """The pip installs one run of setup_python.sh made (`-m pip install ...` lines)."""
    calls.unlink(missing_ok=True)
    proc = subprocess.run(["bash", "scripts/setup_python.sh", *extras], cwd=root, capture_output=True, text=True,
                          timeout=120, env={k: v for k, v in os.environ.items() if k != "TF_SPEC"})
    assert proc.returncode == 0, proc.stderr
    ran = calls.read_text().splitlines() if calls.exists() else []
    return [line for line in ran if line.startswith("-m pip install")]


def test_the_stamp_reinstalls_for_a_new_extra_or_changed_dependencies_and_only_then(tmp_path):
    """setup_python.sh skips pip when the stamp says the same pyproject.toml, TensorFlow pin and
    a superset of the extras were installed; a new extra, an edited pyproject.toml (an extra's or
    the core's dependencies) or another TF_SPEC must reinstall, naming every extra installed so far."""
    root = _scratch_checkout(tmp_path)
    calls = tmp_path / "calls.log"
    site = _stub_venv(root, calls)
    stamp = root / ".venv" / ".tpuestimator-stamp"

    first = _setup(root, calls, "dev")
    assert first[-1] == "-m pip install -q -e .[cpu,dev]", first
    assert stamp.read_text().splitlines()[1].split() == ["cpu", "dev"]
    assert _setup(root, calls, "dev") == []        # same inputs: instant
    assert _setup(root, calls) == []              # a subset (scripts/main.sh after the tests): instant
    for package in STUB_PACKAGES:                 # the stamp matches, a package is gone: reinstalled
        shutil.rmtree(site / package)
        assert _setup(root, calls, "dev")[-1] == "-m pip install -q -e .[cpu,dev]", package
        assert (site / package / "__init__.py").is_file()

    added = _setup(root, calls, "beam")           # an extra not installed yet
    assert added[-1] == "-m pip install -q -e .[beam,cpu,dev]", added   # dev kept: nothing dropped
    assert _setup(root, calls, "dev", "beam") == []

    # An extra's dependencies change in pyproject.toml: its hash in the stamp no longer matches.
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text()
    assert 'beam = ["apache-beam' in text
    pyproject.write_text(text.replace('beam = ["apache-beam', 'beam = ["crcmod>=1.7", "apache-beam', 1))
    changed = _setup(root, calls, "beam")
    assert changed and changed[-1] == "-m pip install -q -e .[beam,cpu]", changed
    assert _setup(root, calls, "beam") == []

    # The core's dependencies change.
    pyproject.write_text(pyproject.read_text().replace('"pandas>=2",', '"pandas>=2.1",', 1))
    assert _setup(root, calls, "beam")[-1] == "-m pip install -q -e .[beam,cpu]"

    # Another TensorFlow pin.
    calls.unlink(missing_ok=True)
    proc = subprocess.run(["bash", "scripts/setup_python.sh", "beam"], cwd=root, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, TF_SPEC="tensorflow-cpu==2.20.*"))
    assert proc.returncode == 0, proc.stderr
    assert "-m pip install -q tensorflow-cpu==2.20.*" in calls.read_text().splitlines()


def _base_python(env_changes: dict) -> str:
    """What scripts/base_python.sh picks in an environment without PYTHON, plus `env_changes`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHON"}
    env.update(env_changes)
    proc = subprocess.run(["bash", "-c", "source scripts/base_python.sh && echo \"$BASE_PYTHON\""], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60, check=True)
    return proc.stdout.strip()


def test_the_venv_is_made_from_python_else_the_complete_system_python_else_python3_on_path(tmp_path):
    """The base Python of .venv (scripts/base_python.sh, used by setup_system.sh and
    setup_python.sh): $PYTHON; else /usr/bin/python3 when it is 3.10/3.11 with venv, ensurepip
    and its headers, even behind another python3 on PATH; else the python3 on PATH."""
    shadow = tmp_path / "bin"
    shadow.mkdir()
    (shadow / "python3").write_text("#!/bin/sh\nexit 1\n")   # another python3, first on PATH
    (shadow / "python3").chmod(0o755)
    path = f"{shadow}:{os.environ['PATH']}"
    assert _base_python({"PYTHON": "/opt/py/bin/python3.11", "PATH": path}) == "/opt/py/bin/python3.11"
    # whether this machine's system Python is complete, found here without the script
    probe = ("import os, sys, sysconfig, venv, ensurepip; assert (3, 10) <= sys.version_info[:2] <= (3, 11); "
             "assert os.path.isfile(os.path.join(sysconfig.get_paths()['include'], 'Python.h'))")
    complete = os.access("/usr/bin/python3", os.X_OK) and subprocess.run(
        ["/usr/bin/python3", "-c", probe], capture_output=True, timeout=60).returncode == 0
    assert _base_python({"PATH": path}) == ("/usr/bin/python3" if complete else "python3")
