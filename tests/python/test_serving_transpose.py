"""Issue 15: with `data.transpose_input: true` the eval input hands the model images as
[h, w, c, b]; every signature of the export must give the model exactly that while clients keep
sending the natural layout ([b, h, w, c] for `features`, records / image bytes for the others).
Each signature, loaded with `tf.saved_model.load`, must match `Estimator.predict` within 1e-5."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
DIGITS = HERE.parents[1] / "python" / "tpuestimator" / "examples" / "digits"
OVERRIDES = ["model=transposed_models:transposed_conv", "params.image_shape=[8,8,1]", "data.transpose_input=true", "train.max_steps=400",
             "train.iterations_per_loop=100", "eval.every_n_steps=400", "train.save_checkpoints_steps=400",
             "export.exporters=[final]", "params.learning_rate=0.01"]
N = 7

# One 400-step training run (trained well enough that the int8 check below is not decided by
# near ties: a 20-step model's mean top probability was 0.15) and a few exports.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    import tensorflow as tf

    from tpuestimator.jobs.from_config import build_estimator, input_fn_for
    from tpuestimator.jobs.job import run_job
    from tpuestimator.jobs.model_dir_jobs import load_job_config

    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    model_dir = str(tmp_path_factory.mktemp("transpose") / "model")
    result = run_job(str(DIGITS / "digits.yaml"), overrides=OVERRIDES, model_dir=model_dir, record=False)
    cfg = load_job_config(result.model_dir)
    est = build_estimator(cfg, model_dir=result.model_dir)
    rows = list(est.predict(input_fn_for(cfg, "eval")))
    expected = {"probabilities": np.stack([r["probabilities"] for r in rows[:N]]),
                "class_id": np.asarray([r["class_id"] for r in rows[:N]])}
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(DIGITS / "eval.tfrecord")).take(N)]
    pixels = [tf.reshape(tf.io.decode_raw(tf.io.parse_single_example(
        r, {"image_raw": tf.io.FixedLenFeature([], tf.string)})["image_raw"], tf.uint8), [8, 8, 1]) for r in records]
    # the eval features in the natural layout: the eval input with transpose_input off
    plain = input_fn_for(cfg, "eval")
    section = plain.data_spec.replace(transpose_input=False)
    from tpuestimator.data import make_input_fn

    natural_all = next(iter(make_input_fn(section, "eval")({"batch_size": 360})))[0]["image"].numpy()
    natural = natural_all[:N]
    transposed = next(iter(plain({"batch_size": N})))[0]["image"].numpy()
    labels = np.concatenate([lab.numpy() for _, lab in input_fn_for(cfg, "eval")({"batch_size": 64})])
    return {"all_class_ids": np.asarray([r["class_id"] for r in rows]), "labels": labels,
            "export": result.export_dir, "estimator": est, "expected": expected, "records": records,
            "pngs": [tf.io.encode_png(p).numpy() for p in pixels], "natural": natural, "natural_all": natural_all,
            "transposed": transposed}


def test_eval_input_is_transposed_and_feature_spec_keeps_the_client_layout(job):
    from tpuestimator.serving import open_export

    assert job["transposed"].shape == (8, 8, 1, N)          # what evaluation gives the model
    np.testing.assert_array_equal(job["transposed"], np.transpose(job["natural"], [1, 2, 3, 0]))
    assert job["estimator"].feature_spec == {"image": ((8, 8, 1), "float32")}
    export = open_export(job["export"])
    assert export.input_specs("features")["image"].shape.as_list() == [None, 8, 8, 1]
    assert export.info.feature_spec == {"image": ((8, 8, 1), "float32")}


@pytest.mark.parametrize("n", [1, N])
@pytest.mark.parametrize("signature", ["serving_default", "image_bytes", "features"])
def test_every_signature_matches_estimator_predict(job, signature, n):
    import tensorflow as tf

    inputs = {"serving_default": {"examples": tf.constant(job["records"][:n])},
              "image_bytes": {"image_bytes": tf.constant(job["pngs"][:n])},
              "features": {"image": tf.constant(job["natural"][:n])}}[signature]
    out = tf.saved_model.load(job["export"]).signatures[signature](**inputs)
    np.testing.assert_allclose(out["probabilities"].numpy(), job["expected"]["probabilities"][:n], atol=1e-5, rtol=0)
    np.testing.assert_array_equal(out["class_id"].numpy(), job["expected"]["class_id"][:n])


def test_predict_with_the_export_matches_estimator_predict(job):
    from tpuestimator.serving import predict

    rows = predict(job["export"], [str(DIGITS / "eval.tfrecord")])
    np.testing.assert_allclose(np.stack([r["probabilities"] for r in rows[:N]]), job["expected"]["probabilities"],
                               atol=1e-5, rtol=0)


def test_tflite_conversion_of_the_features_signature(job):
    from tpuestimator.serving import litert

    content = litert.convert(job["export"])
    out = litert.run(litert.interpreter(content), {"image": job["natural"][:1]})
    np.testing.assert_allclose(out["probabilities"], job["expected"]["probabilities"][:1], atol=1e-5, rtol=0)


def test_export_job_from_checkpoints_applies_the_transpose(job, tmp_path):
    """`tpuestimator export` (export_job) rebuilds the Estimator from the job's input: same signatures."""
    import tensorflow as tf

    from tpuestimator.jobs.model_dir_jobs import export_job

    path = export_job(str(Path(job["export"]).parents[2]), str(tmp_path / "manual"))
    loaded = tf.saved_model.load(path)
    for signature, inputs in (("features", {"image": tf.constant(job["natural"])}),
                              ("serving_default", {"examples": tf.constant(job["records"])})):
        np.testing.assert_allclose(loaded.signatures[signature](**inputs)["probabilities"].numpy(),
                                   job["expected"]["probabilities"], atol=1e-5, rtol=0)


def test_tflite_export_calibrates_and_verifies_in_the_client_layout(job, tmp_path):
    """`tpuestimator export --format tflite --quantize int8`: the calibration and check batches go
    to the `features` signature, so they are read untransposed, as clients send them. The int8
    file is compared here with the float SavedModel on all 360 eval records (agreement computed
    by the test, not read from the export's report)."""
    import tensorflow as tf

    from tpuestimator.jobs.model_dir_jobs import export_model
    from tpuestimator.serving import litert

    result = export_model(str(Path(job["export"]).parents[2]), str(tmp_path / "lite"), format="tflite",
                          quantize="int8", representative_batches=2, warmup=0)
    images = job["natural_all"]
    ours = litert.run(litert.interpreter(Path(result.path).read_bytes()), {"image": images})
    ref = tf.saved_model.load(result.saved_model).signatures["features"](image=tf.constant(images))
    ref_probabilities, ref_class = ref["probabilities"].numpy(), ref["class_id"].numpy()
    assert len(ref_class) == 360
    confident = ref_probabilities.max(axis=1) >= 0.9
    assert confident.mean() >= 0.8, f"the model is not trained well enough: {ref_probabilities.max(axis=1).mean()}"
    agreement = float(np.mean(ours["class_id"] == ref_class))
    assert agreement >= 0.97, agreement
    np.testing.assert_array_equal(ours["class_id"][confident], ref_class[confident])
    assert np.abs(ours["probabilities"] - ref_probabilities).max() < 0.15
    accuracy = {name: float(np.mean(classes == job["labels"])) for name, classes in
                (("int8", ours["class_id"]), ("float", ref_class))}
    assert accuracy["float"] >= 0.9 and accuracy["int8"] >= accuracy["float"] - 0.03, accuracy
    report = result.tflite   # and the export's own report says the same
    assert report["examples"] == 360 and report["representative_examples"] == 128, report
    assert report["top1_agreement"] == pytest.approx(agreement, abs=1e-9) and report["passed"], report


def test_evaluate_export_reads_the_eval_records_untransposed(job):
    """`tpuestimator evaluate EXPORT_DIR`: the eval pipeline's batches go to the `features`
    signature in the client layout; its accuracy is the Estimator's on the same records."""
    from tpuestimator.jobs.export_jobs import evaluate_export

    report = evaluate_export(job["export"], batch_size=64, record=False)
    assert report["num_examples"] == 360
    assert report["accuracy"] == pytest.approx(float(np.mean(job["all_class_ids"] == job["labels"])), abs=1e-9)
