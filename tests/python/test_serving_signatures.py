"""The export's three signatures (`serving_default`: tf.Example records, `image_bytes`: JPEG/PNG
bytes, `features`: decoded tensors), each loaded with `tf.saved_model.load` in a FRESH process
and compared with `Estimator.predict` on the same examples, at batch sizes 1 and 7.

Two tiny jobs train once per module: the bundled digits (raw-pixel MNIST records; PNGs of the
same pixels) and the generated shapes (JPEG records; PNGs of other shapes at another size,
resized by the signature as the eval pipeline resizes them).
"""
from __future__ import annotations

import json
import pickle
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import cli_env

pytestmark = pytest.mark.slow

DIGITS = Path(__file__).resolve().parents[2] / "python" / "tpuestimator" / "examples" / "digits"
SIGNATURES = {"serving_default", "image_bytes", "features"}
BATCHES = (1, 7)
TINY = ["train.max_steps=40", "train.iterations_per_loop=20", "eval.every_n_steps=40",
        "train.save_checkpoints_steps=40", "export.exporters=[final,best]"]

# Runs in a fresh interpreter: nothing of the exporting process (traced functions, Keras
# objects) can leak into what is served. A fork of conftest's `forked_python` server, which
# imported TensorFlow and did nothing else, is such an interpreter, less the import's ~5 CPU s. Then, in the same process (one TensorFlow start, not
# two), TensorFlow's `saved_model_cli show --all --dir EXPORT`: the console script's own code
# (`sys.exit(main())` of tensorflow.python.tools.saved_model_cli; absl's `app.run` exits), its
# listing on this process's stdout.
FRESH = """
import pickle, sys
import tensorflow as tf
calls = pickle.load(open(sys.argv[1], "rb"))
loaded = {}
out = {}
for key, (export, signature, inputs) in calls.items():
    model = loaded.setdefault(export, tf.saved_model.load(export))
    result = model.signatures[signature](**{k: tf.constant(v) for k, v in inputs.items()})
    out[key] = {k: v.numpy() for k, v in result.items()}
pickle.dump(out, open(sys.argv[2], "wb"))
from tensorflow.python.tools.saved_model_cli import main
sys.argv = ["saved_model_cli", "show", "--all", "--dir", sys.argv[3]]
sys.exit(main())
"""


def _job(config: str, model_dir: Path, *extra: str):
    from tpuestimator.jobs.job import run_job

    return run_job(config, overrides=[*TINY, *extra], model_dir=str(model_dir), record=False)


def _records(path: str, n: int | None = None) -> list[bytes]:
    import tensorflow as tf

    ds = tf.data.TFRecordDataset(path)
    return [r.numpy() for r in (ds.take(n) if n else ds)]


def _estimator_predictions(model_dir: str, pattern: str | None = None) -> dict:
    from tpuestimator.jobs.from_config import build_estimator, input_fn_for
    from tpuestimator.jobs.model_dir_jobs import load_job_config

    cfg = load_job_config(model_dir)
    est = build_estimator(cfg, model_dir=model_dir)
    rows = list(est.predict(input_fn_for(cfg, "eval", pattern)))
    return {"probabilities": np.stack([r["probabilities"] for r in rows]),
            "class_id": np.asarray([r["class_id"] for r in rows]),
            "class": [str(r["class"]) for r in rows]}


def _eval_features(model_dir: str) -> np.ndarray:
    from tpuestimator.jobs.from_config import input_fn_for
    from tpuestimator.jobs.model_dir_jobs import load_job_config

    cfg = load_job_config(model_dir)
    ds = input_fn_for(cfg, "eval")({"batch_size": 64, "mode": "eval", "input_context": None, "seed": 0,
                                    "start_step": 0})
    return np.concatenate([f["image"].numpy() for f, _ in ds])


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """The digits job: its export, Estimator.predict on the eval records, and PNGs of the eval pixels."""
    import tensorflow as tf

    tmp = tmp_path_factory.mktemp("digits")
    result = _job(str(DIGITS / "digits.yaml"), tmp / "model")
    eval_file = str(DIGITS / "eval.tfrecord")
    records = _records(eval_file, max(BATCHES))
    parsed = [tf.io.parse_single_example(r, {"image_raw": tf.io.FixedLenFeature([], tf.string)}) for r in records]
    pngs = [tf.io.encode_png(tf.reshape(tf.io.decode_raw(p["image_raw"], tf.uint8), [8, 8, 1])).numpy()
            for p in parsed]
    expected = _estimator_predictions(result.model_dir)
    features = _eval_features(result.model_dir)
    return {"export": result.export_dir, "records": records, "pngs": pngs, "png_expected": expected,
            "expected": expected, "features": features}


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    """The shapes job (JPEG records) and a second record file of PNGs at 48x48 (resized to 32x32)."""
    import tensorflow as tf

    from tpuestimator.data import encode
    from tpuestimator.data.writers import write_shard
    from tpuestimator.examples import shapes as shapes_example

    tmp = tmp_path_factory.mktemp("shapes")
    config = shapes_example.generate(str(tmp / "data"), n_train=48, n_eval=8)
    result = _job(config, tmp / "model", "export.exporters=[final]")   # the best export is checked on digits
    records = _records(str(tmp / "data" / "eval.tfrecord"), max(BATCHES))
    key = "image/encoded"
    jpegs = [tf.io.parse_single_example(r, {key: tf.io.FixedLenFeature([], tf.string)})[key].numpy() for r in records]
    rng = np.random.default_rng(7)
    pngs = []
    for i in range(max(BATCHES)):
        img = shapes_example.draw_shape(shapes_example.CLASSES[i % 3], rng, size=48)
        pngs.append(tf.io.encode_png(np.asarray(img.convert("RGB"), np.uint8)).numpy())
    png_file = str(tmp / "data" / "png.tfrecord")
    write_shard(png_file, [encode.flowers_example(p, i % 3 + 1) for i, p in enumerate(pngs)])
    return {"export": result.export_dir, "records": records, "jpegs": jpegs, "pngs": pngs,
            "expected": _estimator_predictions(result.model_dir),
            "png_expected": _estimator_predictions(result.model_dir, png_file),
            "features": _eval_features(result.model_dir)}


@pytest.fixture(scope="module")
def served(digits, shapes, tmp_path_factory, forked_python):
    """Every signature of both exports at every batch size, run in ONE fresh process."""
    calls = {}
    for name, job in (("digits", digits), ("shapes", shapes)):
        for n in BATCHES:
            calls[(name, "serving_default", n)] = (job["export"], "serving_default", {"examples": job["records"][:n]})
            calls[(name, "features", n)] = (job["export"], "features", {"image": job["features"][:n]})
            calls[(name, "image_bytes", n)] = (job["export"], "image_bytes", {"image_bytes": job["pngs"][:n]})
        if name == "shapes":
            for n in BATCHES:
                calls[(name, "image_bytes_jpeg", n)] = (job["export"], "image_bytes", {"image_bytes": job["jpegs"][:n]})
    tmp = tmp_path_factory.mktemp("fresh")
    with open(tmp / "calls.pkl", "wb") as fh:
        pickle.dump(calls, fh)
    proc = subprocess.run([forked_python, "-c", FRESH, str(tmp / "calls.pkl"), str(tmp / "out.pkl"),
                           shapes["export"]], env=cli_env(), capture_output=True, text=True, timeout=300)
    assert (tmp / "out.pkl").is_file(), proc.stderr[-3000:]
    with open(tmp / "out.pkl", "rb") as fh:
        out = pickle.load(fh)
    out["saved_model_cli"] = (proc.returncode, proc.stdout, proc.stderr)
    return out


def _assert_matches(out: dict, expected: dict, n: int) -> None:
    assert set(out) == {"probabilities", "class_id", "class"}
    assert out["probabilities"].shape == (n, expected["probabilities"].shape[1])   # the batch dimension is free
    np.testing.assert_allclose(out["probabilities"], expected["probabilities"][:n], atol=1e-5, rtol=0)
    np.testing.assert_array_equal(out["class_id"], expected["class_id"][:n])
    assert [c.decode() for c in out["class"]] == expected["class"][:n]


def test_saved_model_cli_lists_the_three_signatures(served):
    returncode, stdout, stderr = served["saved_model_cli"]   # `saved_model_cli show --all` on the shapes export
    # (its exit code is the fresh process's: it ran last there, after the signatures)
    assert returncode == 0, stderr[-2000:]
    listed = {line.split("'")[1] for line in stdout.splitlines() if line.startswith("signature_def[")}
    assert SIGNATURES <= listed, stdout[:2000]
    for name, input_name in (("serving_default", "examples"), ("image_bytes", "image_bytes")):
        block = stdout.split(f"signature_def['{name}']")[1].split("signature_def[")[0]
        assert f"inputs['{input_name}']" in block and "DT_STRING" in block and "shape: (-1)" in block
        for output in ("probabilities", "class_id", "class"):
            assert f"outputs['{output}']" in block
    features = stdout.split("signature_def['features']")[1].split("signature_def[")[0]
    assert "inputs['image']" in features and "shape: (-1, 32, 32, 3)" in features


@pytest.mark.parametrize("n", BATCHES)
@pytest.mark.parametrize("signature", ["serving_default", "features"])
@pytest.mark.parametrize("name", ["digits", "shapes"])
def test_record_and_feature_signatures_match_estimator_predict(served, digits, shapes, name, signature, n):
    job = {"digits": digits, "shapes": shapes}[name]
    _assert_matches(served[(name, signature, n)], job["expected"], n)


@pytest.mark.parametrize("n", BATCHES)
def test_image_bytes_on_the_shapes_jpegs_matches_estimator_predict(served, shapes, n):
    _assert_matches(served[("shapes", "image_bytes_jpeg", n)], shapes["expected"], n)


@pytest.mark.parametrize("n", BATCHES)
@pytest.mark.parametrize("name", ["digits", "shapes"])
def test_image_bytes_on_pngs_matches_estimator_predict(served, digits, shapes, name, n):
    job = {"digits": digits, "shapes": shapes}[name]
    _assert_matches(served[(name, "image_bytes", n)], job["png_expected"], n)


def test_open_export_runs_a_signature_on_a_batch(digits):
    from tpuestimator.errors import ConfigError
    from tpuestimator.serving import open_export

    export = open_export(digits["export"])
    assert SIGNATURES <= set(export.signature_names)
    out = export.run("serving_default", digits["records"][:3])
    np.testing.assert_allclose(out["probabilities"], digits["expected"]["probabilities"][:3], atol=1e-5)
    assert list(out["class"]) == digits["expected"]["class"][:3]          # str, not bytes
    with pytest.raises(ConfigError, match=r"signature.*'nope'.*features, image_bytes, serving_default"):
        export.run("nope", digits["records"][:1])
    with pytest.raises(ConfigError, match=r"inputs.*\['image'\]"):
        export.run("features", {"pixels": digits["features"][:1]})


def test_export_job_and_best_exporter_write_the_signatures(digits, tmp_path):
    """`tpuestimator export` (export_job) and the best exporter write the same three signatures."""
    from tpuestimator.jobs.model_dir_jobs import export_job
    from tpuestimator.serving import open_export

    model_dir = str(Path(digits["export"]).parents[2])
    best = Path(model_dir) / "export" / "best" / "40"
    assert SIGNATURES <= set(open_export(str(best)).signature_names)
    records = digits["records"][:7]
    np.testing.assert_allclose(open_export(str(best)).run("serving_default", records)["probabilities"],
                               digits["expected"]["probabilities"][:7], atol=1e-5)
    path = export_job(model_dir, str(tmp_path / "manual"))
    assert Path(path).parent == tmp_path / "manual" and Path(path).name.isdigit()
    assert SIGNATURES <= set(open_export(path).signature_names)
    meta = json.loads((Path(path) / "assets.extra" / "tpuestimator.json").read_text())
    assert meta["class_names"] == [str(i) for i in range(10)]


def test_tabular_data_gets_no_image_bytes_signature():
    from tpuestimator.data.decode import image_bytes_features
    from tpuestimator.errors import DataError
    from tpuestimator.serving import data_serving_inputs

    section = {"format": "features", "label": "y", "train": "t.tfrecord",
               "features": {"x": {"dtype": "float32", "shape": [2]}, "y": {"dtype": "int64"}}}
    assert set(data_serving_inputs(section)) == {"serving_default"}
    with pytest.raises(DataError, match="Raw image bytes need an image model"):
        image_bytes_features(section, [b"\x89PNG"])
