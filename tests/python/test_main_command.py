"""The README's main command (`bash scripts/main.sh`), run as a new user would, and what it leaves.

The job runs once (a module fixture: conftest.py keeps such a file on one xdist worker); the tests read what it
left: eval accuracy, the export served in a fresh process, and a rerun that resumes.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _main_sh(work: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, WORK_DIR=str(work), TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("PYTHONPATH", None)     # as a user runs it: the venv's tpuestimator, nothing else
    proc = subprocess.run(["bash", str(REPO / "scripts" / "main.sh"), *args], env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def main_job(tmp_path_factory):
    work = tmp_path_factory.mktemp("main")
    return work, _main_sh(work)


def test_main_command_trains_digits_exports_and_serves(main_job, python_env, forked_python):
    tmp_path, proc = main_job
    out = proc.stdout
    accuracy = float(next(line.split()[1] for line in out.splitlines() if line.strip().startswith("accuracy")))
    assert accuracy >= 0.95, out
    export = next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("export:"))
    export = tmp_path / export
    assert (export / "saved_model.pb").is_file()
    run_dir = next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("run record:"))
    assert (tmp_path / run_dir / "tfruns.d" / "evaluation.json").is_file()

    # Estimator.predict in this process against the SavedModel in a fresh process (a fork of
    # the server that only imported TensorFlow: nothing of this process's model is there).
    from tpuestimator.jobs.from_config import build_estimator, input_fn_for
    from tpuestimator.jobs.model_dir_jobs import load_job_config

    cfg = load_job_config(str(tmp_path / "models" / "digits"))
    est = build_estimator(cfg, model_dir=str(tmp_path / "models" / "digits"))
    ours = np.stack([p["probabilities"] for p in est.predict(input_fn_for(cfg, "eval"))])
    script = ("import json, sys; from tpuestimator.serving.exports import predict; "
              "rows = predict(sys.argv[1], [sys.argv[2]]); "
              "print(json.dumps([[float(v) for v in r['probabilities']] for r in rows]))")
    fresh = subprocess.run([forked_python, "-c", script, str(export), str(tmp_path / "digits" / "eval.tfrecord")],
                           env=python_env, capture_output=True, text=True, timeout=300)
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    served = np.asarray(json.loads(fresh.stdout.strip().splitlines()[-1]))
    assert served.shape == ours.shape == (360, 10)
    assert np.abs(served - ours).max() <= 1e-5

    from tpuestimator.errors import ConfigError
    from tpuestimator.serving.exports import predict

    with pytest.raises(ConfigError, match=r"inputs.image.*shape \(n, 8, 8, 1\)"):
        predict(str(export), np.zeros((2, 64), "float32"))   # a clear error, not a crash in TensorFlow
    rows = predict(str(export), np.zeros((2, 8, 8, 1), "float32"))
    assert len(rows) == 2 and isinstance(rows[0]["class"], str)


def test_rerun_resumes_and_does_not_retrain(main_job, monkeypatch, caplog, capsys):
    # The README: "tpuestimator train digits/digits.yaml  # rerun: resumes from the latest
    # checkpoint", the train command main.sh ran, in the folder it ran in. Runs after the test
    # above (file order on one worker), which reads the first job's export. In this process
    # (`cli.main`, what the console script calls): the resume is not about the process, and a
    # second run of main.sh cost two TensorFlow starts (its set-up's import check, the train).
    import logging

    from tpuestimator.cli import main

    tmp_path, _ = main_job
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.INFO, logger="tpuestimator"):
        # (no export: nothing here reads it, and the final and best exports cost seconds)
        assert main(["train", "digits/digits.yaml", "--set", "train.max_steps=1600", "--set", "export.enabled=false"]) == 0
    out = capsys.readouterr().out
    steps = [int(r.getMessage().split("step:")[1].split("|")[0]) for r in caplog.records
             if r.getMessage().startswith("train") and "step:" in r.getMessage()]
    assert steps and min(steps) > 1500 and max(steps) == 1600, caplog.text[-3000:]   # resumed after step 1500
    assert "trained to global step 1600" in out
