"""Issue 19 item 5: `Estimator.predict` under `multi_worker` yields ALL the predictions, in input
order, on every worker (each worker predicts its share of each padded global batch; the shares are
gathered), not only that worker's share. Two real worker processes on 127.0.0.1."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from helpers import array_input_fn, make_data

HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.slow


def test_every_worker_predicts_every_example_in_input_order(tmp_path, forked_python):
    from tpuestimator import Estimator, RunConfig
    from tpuestimator.cluster.layout import free_ports

    ports = free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    model_dir = tmp_path / "model"
    (tmp_path / "tmp").mkdir()
    procs = []
    for index in range(2):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TMPDIR=str(tmp_path / "tmp"),
                   PYTHONPATH=os.pathsep.join([str(HERE.parents[1] / "python"), str(HERE)]),
                   TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}))
        # forked_python: each worker a process of its own without its TensorFlow import (conftest.py)
        procs.append(subprocess.Popen([forked_python, str(HERE / "multiworker_predict.py"), str(model_dir)], env=env,
                                      cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
        assert proc.returncode == 0 and len(lines) == 1, out[-2000:] + err[-3000:]
        results.append(json.loads(lines[0][len("RESULT "):]))
    # one process, the cluster's checkpoint: the reference predictions
    x, y = make_data(101)
    single = Estimator("linear", RunConfig(model_dir=str(model_dir), strategy="cpu", predict_batch_size=16),
                       {"num_classes": 3, "learning_rate": 0.05})
    rows = list(single.predict(array_input_fn(x, y)))
    assert single.global_step == 6
    for worker, result in enumerate(results):
        assert result["replicas"] == 2
        assert len(result["class_id"]) == 101, (worker, len(result["class_id"]))
        assert result["class_id"] == [int(r["class_id"]) for r in rows], worker
        np.testing.assert_allclose(np.asarray(result["probabilities"]), np.stack([r["probabilities"] for r in rows]),
                                   atol=1e-5, rtol=0, err_msg=f"worker {worker}")
