"""Issue 19 item 3: `data.transpose_input` with several replicas. The eval/predict input is
padded, masked and split between the replicas on the BATCH axis, which under transpose_input is
the last axis of `image` ([h, w, c, b]), not the first. On 8 logical CPU replicas evaluation and
prediction must give what one replica gives, example for example and in input order."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
DIGITS = HERE.parents[1] / "python" / "tpuestimator" / "examples" / "digits"
# eval batch 64 over 8 replicas: 8 per replica; the eval file's last batch is partial (padded)
OVERRIDES = ["model=transposed_models:transposed_conv", "params.image_shape=[8,8,1]", "data.transpose_input=true",
             "train.iterations_per_loop=10", "train.save_checkpoints_steps=10", "eval.batch_size=64",
             "predict.batch_size=64"]


def _estimator(model_dir, strategy):
    from tpuestimator.config import load_config
    from tpuestimator.jobs.from_config import build_estimator, input_fn_for

    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    cfg = load_config(str(DIGITS / "digits.yaml"), overrides=[*OVERRIDES, f"run.strategy={strategy}"])
    return build_estimator(cfg, model_dir=model_dir), cfg, input_fn_for


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    model_dir = str(tmp_path_factory.mktemp("transpose_replicas") / "model")
    out = {}
    for strategy in ("cpu", "mirrored"):   # the mirrored one restores the cpu one's checkpoint
        est, cfg, input_fn_for = _estimator(model_dir, strategy)
        if strategy == "cpu":
            est.train(input_fn_for(cfg, "train"), max_steps=20)
        out[strategy] = {"replicas": est.num_replicas, "step": est.global_step,
                         "metrics": est.evaluate(input_fn_for(cfg, "eval")),
                         "predictions": list(est.predict(input_fn_for(cfg, "eval")))}
    labels = np.concatenate([lab.numpy() for _, lab in input_fn_for(cfg, "eval")({"batch_size": 64})])
    out["labels"] = labels
    return out


def test_eight_replicas_evaluate_every_example_as_one_replica_does(results):
    one, eight = results["cpu"], results["mirrored"]
    assert (one["replicas"], eight["replicas"]) == (1, 8)
    assert one["step"] == eight["step"] == 20
    assert len(results["labels"]) % 64    # the last batch is partial: padding is exercised
    assert one["metrics"]["num_examples"] == eight["metrics"]["num_examples"] == len(results["labels"])
    assert eight["metrics"]["loss"] == pytest.approx(one["metrics"]["loss"], rel=1e-5)


def test_eight_replicas_predict_every_example_in_input_order(results):
    one, eight = results["cpu"]["predictions"], results["mirrored"]["predictions"]
    assert len(one) == len(eight) == len(results["labels"])
    np.testing.assert_allclose(np.stack([p["probabilities"] for p in eight]),
                               np.stack([p["probabilities"] for p in one]), atol=1e-5, rtol=0)
    assert [p["class_id"] for p in eight] == [p["class_id"] for p in one]
