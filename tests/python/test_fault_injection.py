"""Issue 13: fault injection. `tpuestimator train` (the CLI, as a subprocess) is killed at
seeded random points and resumed, and what it leaves is checked after every fault and at the
end:

- each fault: SIGKILL at a random time after start, at the latest once the run wrote its
  checkpoint of step 40 (the lock, the run record's creation, the first loops; the process is a fork that has TensorFlow imported, conftest.py's
  `forked_python`, so the kill lands in our code, not in TensorFlow's import), SIGKILL / SIGTERM / SIGINT once the latest checkpoint
  reached a random step AND was written by this process (a kill a few ms after a checkpoint
  lands in a device loop, in the next checkpoint's write, an evaluation or an export; never
  while the interpreter starts, where no handler of ours can run yet). SIGTERM/SIGINT must
  exit 143/130 with a checkpoint at the step where the run record says it stopped, and a
  chain whose SIGTERM lands has at least one such stop (faults after a run that completed
  are not run);
- after every fault: the latest checkpoint loads and holds only finite values; every run
  record is valid (`runs/validate.py`);
- after the rerun that completes (`cli.main` in the test's process: no signal comes to it):
  the global step is ``train.max_steps``; no temp leftovers
  (``*.tmp``, ``*_temp``) in the model dir, its exports or the runs folder, no lock file; the
  final evaluation equals that of an uninterrupted run.

The kills of one model dir form a chain (kill, rerun, kill the rerun, ..., rerun to the end),
as a preemptible VM meets them. CI runs ``TPUESTIMATOR_FAULT_POINTS`` = 5 points (one chain);
the long mode runs 50 (ten chains):

    TPUESTIMATOR_FAULT_POINTS=50 pytest -n 0 tests/python/test_fault_injection.py

``TPUESTIMATOR_FAULT_SEED`` picks another set of points. A failure message names the chain,
the point and the seed, so it can be replayed.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging
import math
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

import fork_python
from conftest import FIXTURES, cli_env
from tpuestimator.jobs.modeldir import checkpoint_step
from tpuestimator.runs import check_run_dir, ls_runs

pytestmark = pytest.mark.real_process  # TPUESTIMATOR_STRESS=N repeats these (conftest.py)

POINTS = int(os.environ.get("TPUESTIMATOR_FAULT_POINTS", "5"))
SEED = int(os.environ.get("TPUESTIMATOR_FAULT_SEED", "13"))
PER_CHAIN = 5
MAX_STEPS = 300
SAVE_EVERY = 20
# Small loops and frequent checkpoints, so that kills land in loops, checkpoint writes,
# evaluations (every 100 steps) and exports (best after each evaluation, final at the end).
# A small learning rate keeps the final loss far from its floor, so that it tells apart
# runs that saw other batches. (600 steps, evaluations every 200, spent twice the CPU time on
# the same kinds of fault points.)
SETTINGS = {"params": {"learning_rate": 0.003},
            "train": {"max_steps": MAX_STEPS, "iterations_per_loop": 5, "save_checkpoints_steps": SAVE_EVERY,
                      "keep_checkpoint_max": 3},
            "eval": {"every_n_steps": 100},
            "export": {"enabled": True, "exporters": ["final", "best"]}}
TIME_FAULT_LATEST_STEP = 40  # the smallest step a step fault may wait for (plan_faults)
TIMEOUT_S = 900  # per CLI run: a safety net only (at a load of 18 on 2 cores, one run of 195 steps took over 300 s)


@dataclasses.dataclass
class Fault:
    chain: int
    index: int
    kind: str            # "SIGKILL", "SIGTERM", "SIGINT"
    at_step: int | None  # signal once the latest checkpoint reached this step (+ a random delay)
    at_time: float | None  # or this many seconds after the start
    delay: float = 0.0
    returncode: int | None = None
    stopped_at: int | None = None  # the latest checkpoint after the fault
    problems: list = dataclasses.field(default_factory=list)  # found right after the fault
    row: dict | None = None

    def __str__(self) -> str:
        when = f"checkpoint >= {self.at_step} + {self.delay * 1000:.0f} ms" if self.at_step is not None \
            else f"{self.at_time:.2f} s after start"
        return f"chain {self.chain} point {self.index}: {self.kind} at {when} (seed {SEED})"


def plan_faults(seed: int, points: int) -> list[list[Fault]]:
    """Chains of up to `PER_CHAIN` faults: the first of each at a random time, the others at
    increasing random steps; the kinds shuffled, with a SIGTERM in every chain."""
    rng = random.Random(seed)
    chains = []
    for chain in range(math.ceil(points / PER_CHAIN)):
        n = min(PER_CHAIN, points - chain * PER_CHAIN)
        kinds = ["SIGKILL"] + (["SIGTERM"] if n > 1 else []) + [rng.choice(["SIGKILL", "SIGKILL", "SIGINT"])
                                                               for _ in range(n - 2)]
        kinds = kinds[:1] + rng.sample(kinds[1:], len(kinds) - 1)
        steps = sorted(rng.sample(range(40, MAX_STEPS - 40, 20), n - 1))
        faults = [Fault(chain, 0, kinds[0], None, rng.uniform(0.5, 6.0))]
        faults += [Fault(chain, i + 1, kinds[i + 1], step, None, rng.uniform(0.0, 0.08))
                   for i, step in enumerate(steps)]
        chains.append(faults)
    return chains


def train_command(python: str, config: Path, model_dir: Path, runs: Path) -> list[str]:
    return [python, "-m", "tpuestimator", "train", str(config), "--model-dir", str(model_dir),
            "--runs-dir", str(runs)]


def inject(fault: Fault, cmd: list[str], env: dict, model_dir: Path) -> subprocess.CompletedProcess:
    """Runs `cmd` and sends the fault's signal at its point; returns how the process ended."""
    with open(model_dir.parent / f"chain{fault.chain}-point{fault.index}.log", "w") as log:
        # A step fault waits for a checkpoint of THIS process (a step past the one it resumes
        # from): the checkpoint a previous run left may already be past `at_step`, and a signal
        # within ms of the start reaches the interpreter before any code of ours runs.
        resumes_from = checkpoint_step(model_dir)
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        start = time.monotonic()
        try:
            while proc.poll() is None and time.monotonic() - start < TIMEOUT_S:
                step = checkpoint_step(model_dir)
                if fault.at_time is not None:
                    # at its time, or at the latest once this process wrote the checkpoint of step
                    # TIME_FAULT_LATEST_STEP: a forked run needs no import, and on a fast machine a
                    # few seconds took it to step 280, leaving the chain's step faults nothing to hit
                    left = fault.at_time - (time.monotonic() - start)
                    if left <= 0 or (step is not None and step >= TIME_FAULT_LATEST_STEP
                                     and (resumes_from is None or step > resumes_from)):
                        break
                    time.sleep(min(left, 0.02))
                    continue
                if step is not None and step >= fault.at_step and (resumes_from is None or step > resumes_from):
                    time.sleep(fault.delay)
                    break
                # every 5 ms once the next checkpoint may be the one (a signal lands within ms of it);
                # every 50 ms while it is two or more checkpoints away (the polls cost CPU s)
                far = max(step or 0, resumes_from or 0) + 2 * SAVE_EVERY < fault.at_step
                time.sleep(0.05 if far else 0.005)
            if proc.poll() is None:
                proc.send_signal(getattr(signal, fault.kind))
            proc.wait(TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            # a SIGKILLed launcher's run (a fork) dies milliseconds after it: nothing is read before
            fork_python.settle(cmd[0])
    return subprocess.CompletedProcess(cmd, proc.returncode)


def checkpoint_values(model_dir: Path) -> dict[str, np.ndarray]:
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(model_dir))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def assert_checkpoint_finite(model_dir: Path, what: str) -> None:
    values = checkpoint_values(model_dir)
    assert values, f"{what}: empty checkpoint"
    for name, value in values.items():
        if np.asarray(value).dtype.kind == "f":
            assert np.isfinite(value).all(), f"{what}: {name} is not finite"


def leftovers(*folders: Path) -> list[str]:
    found = []
    for folder in folders:
        for path in folder.rglob("*"):
            if path.name.endswith((".tmp", "_temp")) or "_temp" in path.name or path.name == "tpuestimator.lock":
                found.append(str(path.relative_to(folder.parent)))
    return found


def final_loss(run_dir: str) -> float:
    return json.loads((Path(run_dir) / "tfruns.d" / "evaluation.json").read_text())["loss"]


def run_in_this_process(args: list[str]) -> subprocess.CompletedProcess:
    """`tpuestimator ARGS` as `cli.main` (what the console script calls) in this process: its
    exit code, what it printed and its log. For the rerun that completes a chain: no signal
    comes to it, and a TensorFlow start of its own cost seconds."""
    from tpuestimator.cli import main

    printed, log = io.StringIO(), io.StringIO()
    handler, logger = logging.StreamHandler(log), logging.getLogger("tpuestimator")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        with contextlib.redirect_stdout(printed):
            code = main(args)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return subprocess.CompletedProcess(args, code, printed.getvalue(), log.getvalue())


def uninterrupted_loss(config: Path, model_dir: Path) -> float:
    """The final evaluation loss of the same job run once without a fault, in this process (what
    `tpuestimator train` runs: `run_job`; the CLI's process is what the chains test, and a
    TensorFlow start of its own cost seconds). `run.strategy: auto` picks one CPU device here as
    in the CLI (the session's 8 logical CPUs count only with `run.num_cpu_devices`)."""
    from tpuestimator.jobs.job import run_job

    result = run_job(str(config), model_dir=str(model_dir), record=False, export=False)
    assert result.global_step == MAX_STEPS
    return result.metrics["loss"]


@pytest.fixture(scope="module")
def faults_run(tmp_path_factory, fixtures_dir_module, python_env_module, forked_python, stress_round):
    """Runs every chain of faults, then the uninterrupted baseline (again in each round of stress
    mode: `stress_round`)."""
    base = tmp_path_factory.mktemp("faults")
    raw = yaml.safe_load((fixtures_dir_module / "parity" / "parity.yaml").read_text())
    raw["data"]["manifest"] = str(fixtures_dir_module / "parity" / "manifest.json")
    for section, values in SETTINGS.items():
        raw.setdefault(section, {}).update(values)
    config = base / "faults.yaml"
    config.write_text(yaml.safe_dump(raw))
    env = python_env_module
    chains = []
    for faults in plan_faults(SEED, POINTS):
        folder = base / f"chain{faults[0].chain}"
        folder.mkdir()
        model_dir, runs = folder / "m", folder / "runs"
        # forked_python: each run a real process, signalled and killed, without its TensorFlow
        # import (~6 CPU s a run; conftest.py)
        cmd = train_command(forked_python, config, model_dir, runs)
        for fault in faults:
            done = inject(fault, cmd, env, model_dir)
            fault.returncode = done.returncode
            fault.stopped_at = checkpoint_step(model_dir)
            if fault.stopped_at is not None:  # what a rerun would resume from: loadable and finite
                try:
                    assert_checkpoint_finite(model_dir, str(fault))
                except Exception as exc:  # noqa: BLE001 - reported by the test, with the point
                    fault.problems.append(f"checkpoint: {type(exc).__name__}: {exc}")
            rows = ls_runs(runs) if runs.exists() else []
            fault.row = rows[0] if rows else None  # the run this fault ended
            for row in rows:
                fault.problems += [f"{row['run_dir']}: {p}" for p in check_run_dir(row["run_dir"])]
            if done.returncode == 0:  # the run completed before the signal: the chain is over
                break
        final = run_in_this_process(cmd[3:])  # the rerun that completes
        chains.append({"faults": faults, "model_dir": model_dir, "runs": runs, "final": final, "folder": folder})
    return {"chains": chains, "baseline_loss": uninterrupted_loss(config, base / "baseline")}


@pytest.fixture(scope="module")
def fixtures_dir_module():
    return FIXTURES


@pytest.fixture(scope="module")
def python_env_module():
    return cli_env()  # `python_env`'s, for the module fixture above: as on the core install


def test_the_plan_is_seeded_and_has_the_asked_number_of_points():
    chains = plan_faults(SEED, POINTS)
    assert sum(len(c) for c in chains) == POINTS >= 5 and plan_faults(SEED, POINTS)[0][1].at_step == chains[0][1].at_step
    assert all(any(f.kind == "SIGTERM" for f in c) for c in chains if len(c) > 1)
    assert all(f.at_time is not None for f in (c[0] for c in chains))


@pytest.mark.slow
def test_every_fault_leaves_a_resumable_model_dir_and_valid_records(faults_run):
    landed = 0
    for chain in faults_run["chains"]:
        ran = [fault for fault in chain["faults"] if fault.returncode is not None]
        for fault in ran:  # the faults after a run that completed are never run
            assert fault.problems == [], str(fault)
            if fault.returncode == 0:
                continue  # the run ended before the signal came
            landed += 1
            expected = {"SIGKILL": -signal.SIGKILL, "SIGTERM": 143, "SIGINT": 130}[fault.kind]
            log = (chain["folder"] / f"chain{fault.chain}-point{fault.index}.log").read_text()
            # Only a fault at a random TIME may come during Python's own start-up, before `cli.main`
            # runs, and end the process the default way; a step fault comes after a checkpoint of
            # this process, when the job's handlers are installed.
            early = {"SIGTERM": -signal.SIGTERM, "SIGINT": -signal.SIGINT}.get(fault.kind) \
                if fault.at_time is not None else None
            assert fault.returncode in (expected, early), f"{fault}: exit {fault.returncode}\n{log[-3000:]}"
            if fault.kind != "SIGKILL" and fault.returncode == expected:
                assert "Traceback" not in log, f"{fault}: {log[-3000:]}"
                # the checkpoint is at the step where the stopped run says it stopped (a stop that
                # saved no checkpoint, "aborted", is not what one signal may do)
                row = fault.row
                assert row["status"] == "interrupted" and fault.kind in row["interrupted"], f"{fault}: {row}"
                assert f"step {fault.stopped_at}:" in row["interrupted"], f"{fault}: {row['interrupted']}"
        if any(f.kind == "SIGTERM" and f.returncode != 0 for f in ran):  # at least one handled stop
            exits = [f.returncode for f in ran]
            assert any(code in (143, 130) for code in exits), \
                f"chain {chain['faults'][0].chain}: no fault exited 143/130: {exits}"
        final = chain["final"]
        assert final.returncode == 0, final.stdout[-2000:] + final.stderr[-3000:]
        assert f"trained to global step {MAX_STEPS}" in final.stdout
        assert checkpoint_step(chain["model_dir"]) == MAX_STEPS
        assert_checkpoint_finite(chain["model_dir"], f"chain {chain['faults'][0].chain}")
        rows = ls_runs(chain["runs"])
        assert rows[0]["status"] == "completed" and rows[0]["global_step"] == MAX_STEPS
        for row in rows:
            assert check_run_dir(row["run_dir"]) == [], row["run_dir"]
            assert row["status"] in ("completed", "interrupted"), row
        assert leftovers(chain["model_dir"], chain["runs"]) == [], f"chain {chain['faults'][0].chain}"
        assert (chain["model_dir"] / "export" / "final" / str(MAX_STEPS) / "saved_model.pb").is_file()
    assert landed >= min(POINTS, 5) - 1, "too few faults landed before the runs completed"


@pytest.mark.slow
def test_the_final_evaluation_equals_an_uninterrupted_run(faults_run):
    for chain in faults_run["chains"]:
        rows = ls_runs(chain["runs"])
        assert final_loss(rows[0]["run_dir"]) == pytest.approx(faults_run["baseline_loss"], rel=1e-4, abs=1e-7), \
            f"chain {chain['faults'][0].chain}: {[str(f) for f in chain['faults']]}"
