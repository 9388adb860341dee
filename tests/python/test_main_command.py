"""The README's main command, run as a new user would, and the export it leaves."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest


@pytest.mark.slow
def test_main_command_trains_digits_exports_and_serves(tmp_path, python_env):
    cli = [sys.executable, "-m", "tpuestimator"]
    subprocess.run(cli + ["example", "digits", "--out", "digits"], cwd=tmp_path, env=python_env, check=True,
                   capture_output=True, timeout=120)
    proc = subprocess.run(cli + ["train", "digits/digits.yaml"], cwd=tmp_path, env=python_env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    accuracy = float(next(line.split()[1] for line in out.splitlines() if line.strip().startswith("accuracy")))
    assert accuracy >= 0.95, out
    export = next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("export:"))
    export = tmp_path / export
    assert (export / "saved_model.pb").is_file()
    run_dir = next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("run record:"))
    assert (tmp_path / run_dir / "tfruns.d" / "evaluation.json").is_file()

    # Estimator.predict in this process against the SavedModel in a fresh process.
    from tpuestimator.job import build_estimator, load_job_config, input_fn_for

    cfg = load_job_config(str(tmp_path / "models" / "digits"))
    est = build_estimator(cfg, model_dir=str(tmp_path / "models" / "digits"))
    ours = np.stack([p["probabilities"] for p in est.predict(input_fn_for(cfg, "eval"))])
    script = ("import json, sys; from tpuestimator.job import predict; "
              "rows = predict(sys.argv[1], [sys.argv[2]]); "
              "print(json.dumps([[float(v) for v in r['probabilities']] for r in rows]))")
    fresh = subprocess.run([sys.executable, "-c", script, str(export), str(tmp_path / "digits" / "eval.tfrecord")],
                           env=python_env, capture_output=True, text=True, timeout=300)
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    served = np.asarray(json.loads(fresh.stdout.strip().splitlines()[-1]))
    assert served.shape == ours.shape == (360, 10)
    assert np.abs(served - ours).max() <= 1e-5

    from tpuestimator.errors import ConfigError
    from tpuestimator.job import predict

    with pytest.raises(ConfigError, match=r"inputs.image.*shape \(n, 8, 8, 1\)"):
        predict(str(export), np.zeros((2, 64), "float32"))   # a clear error, not a crash in TensorFlow
    rows = predict(str(export), np.zeros((2, 8, 8, 1), "float32"))
    assert len(rows) == 2 and isinstance(rows[0]["class"], str)


def test_rerun_resumes_and_does_not_retrain(tmp_path, python_env):
    cli = [sys.executable, "-m", "tpuestimator"]
    subprocess.run(cli + ["example", "digits", "--out", "d"], cwd=tmp_path, env=python_env, check=True,
                   capture_output=True, timeout=120)
    common = ["--set", "model=linear", "--set", "eval.every_n_steps=100", "--no-record"]
    first = subprocess.run(cli + ["train", "d/digits.yaml", "--set", "train.max_steps=200"] + common,
                           cwd=tmp_path, env=python_env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    second = subprocess.run(cli + ["train", "d/digits.yaml", "--set", "train.max_steps=300"] + common,
                            cwd=tmp_path, env=python_env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "restored" in second.stderr or "step:     300" in second.stderr
    steps = [int(line.split("step:")[1].split("|")[0]) for line in second.stderr.splitlines()
             if line.startswith("train") and "step:" in line]
    assert steps and min(steps) > 200 and max(steps) == 300   # resumed after the step-200 checkpoint
    assert "trained to global step 300" in second.stdout
