"""`tpuestimator export --format tflite [--quantize ...]` and TF Serving warmup requests on a tiny
digits model trained once per module (the bundled digits data: 1437 train / 360 eval records).

The figures are recomputed here with the TFLite interpreter and the SavedModel's `features`
signature, not read back from the command's own report.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow

DIGITS = Path(__file__).resolve().parents[2] / "python" / "tpuestimator" / "examples" / "digits"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A digits CNN trained 200 steps, exported by the job with 3 warmup requests."""
    from tpuestimator.jobs.job import run_job

    tmp = tmp_path_factory.mktemp("litert")
    result = run_job(str(DIGITS / "digits.yaml"), model_dir=str(tmp / "model"), record=False,
                     overrides=["train.max_steps=200", "train.iterations_per_loop=100", "eval.every_n_steps=200",
                                "train.save_checkpoints_steps=200", "export.exporters=[final]", "export.warmup=3"])
    return tmp, result


@pytest.fixture(scope="module")
def eval_features(trained):
    from tpuestimator.jobs.from_config import input_fn_for
    from tpuestimator.jobs.model_dir_jobs import load_job_config

    cfg = load_job_config(trained[1].model_dir)
    ds = input_fn_for(cfg, "eval")({"batch_size": 360, "mode": "eval", "input_context": None, "seed": 0,
                                    "start_step": 0})
    return np.concatenate([f["image"].numpy() for f, _ in ds])


@pytest.fixture(scope="module")
def exports(trained):
    """Every quantization mode, exported once."""
    from tpuestimator.jobs.model_dir_jobs import export_model

    tmp, result = trained
    return {mode: export_model(result.model_dir, str(tmp / "lite"), format="tflite", quantize=mode,
                               representative_batches=2)
            for mode in ("none", "dynamic", "float16", "int8")}


def _compare(result, images) -> tuple[float, float]:
    """(max |p_tflite - p_savedmodel|, top-1 agreement) over `images`, computed here."""
    import tensorflow as tf

    from tpuestimator.serving import litert

    model = litert.interpreter(Path(result.path).read_bytes())
    ours = litert.run(model, {"image": images})
    loaded = tf.saved_model.load(result.saved_model)
    ref = loaded.signatures["features"](image=tf.constant(images))
    diff = float(np.abs(ours["probabilities"] - ref["probabilities"].numpy()).max())
    return diff, float(np.mean(ours["class_id"] == ref["class_id"].numpy()))


def test_float_tflite_matches_the_saved_model(exports, eval_features):
    result = exports["none"]
    assert result.path.endswith(f"model-{Path(result.saved_model).name}.tflite") and os.path.isfile(result.path)
    diff, top1 = _compare(result, eval_features)
    assert diff <= 1e-4 and top1 == 1.0
    report = result.tflite
    assert report["passed"] and report["examples"] == 360 and report["max_abs_diff"] <= 1e-4
    assert report["tflite_bytes"] == os.path.getsize(result.path)
    meta = json.loads((Path(result.saved_model) / "assets.extra" / "tpuestimator.json").read_text())
    assert meta["tflite"][Path(result.path).name] == report      # written into the export's metadata
    # every mode's .tflite sits beside the one SavedModel of the checkpoint, its figures in the metadata
    assert {r.saved_model for r in exports.values()} == {result.saved_model}
    assert set(meta["tflite"]) == {Path(r.path).name for r in exports.values()}


@pytest.mark.parametrize("mode, max_size_ratio", [("dynamic", 0.35), ("float16", 0.6), ("int8", 0.35)])
def test_quantized_tflite_keeps_top1_on_99_percent_of_the_eval_set(exports, eval_features, mode, max_size_ratio):
    result = exports[mode]
    _, top1 = _compare(result, eval_features)
    assert top1 >= 0.99, f"{mode}: top-1 agreement {top1:.4f} on 360 eval examples"
    assert result.tflite["top1_agreement"] == pytest.approx(top1) and result.tflite["passed"]
    float_bytes = exports["none"].tflite["tflite_bytes"]
    assert os.path.getsize(result.path) <= max_size_ratio * float_bytes
    assert Path(result.path).name.endswith(f"-{mode}.tflite")


def test_int8_is_full_integer_calibrated_on_training_batches(exports):
    from tpuestimator.serving import litert

    result = exports["int8"]
    assert result.tflite["representative_examples"] == 2 * 64          # 2 batches of eval.batch_size
    model = litert.interpreter(Path(result.path).read_bytes())
    model.allocate_tensors()
    kinds = {d["dtype"].__name__ for d in model.get_tensor_details()}
    assert "int8" in kinds
    weights = [d for d in model.get_tensor_details() if len(d["shape"]) == 4 and d["shape"][0] in (32, 64)]
    assert weights and all(d["dtype"].__name__ == "int8" for d in weights)   # the conv kernels are int8


def test_the_converters_full_collection_leaves_the_callers_heap_out(trained, unfrozen_heap):
    """TensorFlow's converter runs `gc.collect()`; the objects of the process that converts (a
    long R session, a notebook) are frozen for the conversion, then thawed."""
    import gc

    from tpuestimator.serving import litert

    assert gc.get_freeze_count() == 0, "something in this test process froze objects already"
    before = len(gc.get_objects())
    frozen_at_full_collections = []

    def watch(phase, info):
        if phase == "start" and info["generation"] == 2:
            frozen_at_full_collections.append(gc.get_freeze_count())

    gc.callbacks.append(watch)
    try:
        content = litert.convert(trained[1].export_dir)
    finally:
        gc.callbacks.remove(watch)
    assert content[4:8] == b"TFL3"                          # a TFLite flatbuffer
    assert frozen_at_full_collections, "no full collection ran during the conversion"
    # the converter's own collection ran with (at least) the caller's objects frozen
    assert max(frozen_at_full_collections) >= before // 2, (frozen_at_full_collections, before)
    assert gc.get_freeze_count() == 0                        # thawed afterwards


def test_a_heap_the_caller_froze_stays_frozen_after_a_conversion(trained, unfrozen_heap):
    import gc

    from tpuestimator.serving import litert

    def frozen(obj) -> bool:  # a frozen object is in none of the collector's generations
        return not any(o is obj for o in gc.get_objects())

    callers = ["an object of the caller's"]
    assert not frozen(callers)
    gc.freeze()
    try:
        assert frozen(callers)
        litert.convert(trained[1].export_dir)
        assert frozen(callers), "the conversion thawed objects its caller had frozen"
    finally:
        gc.unfreeze()
    assert not frozen(callers)


def test_the_command_prints_the_figures(trained, capsys):
    from tpuestimator.cli import build_parser

    tmp, result = trained
    args = build_parser().parse_args(["export", result.model_dir, "--out", str(tmp / "cli"), "--format", "tflite",
                                      "--quantize", "dynamic", "--warmup", "2"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "export: " in out and "-dynamic.tflite" in out
    assert "tflite (dynamic):" in out and "bytes (SavedModel:" in out
    assert "verified against the SavedModel on 360 eval examples: top-1 agreement" in out and "PASS" in out
    assert "warmup requests: 2" in out


def test_bad_quantize_and_counts_are_clear_errors(trained, tmp_path):
    from tpuestimator.errors import ConfigError
    from tpuestimator.jobs.model_dir_jobs import export_model

    model_dir = trained[1].model_dir
    with pytest.raises(ConfigError, match=r"quantize.*int4.*none \| dynamic \| float16 \| int8"):
        export_model(model_dir, str(tmp_path), format="tflite", quantize="int4")
    with pytest.raises(ConfigError, match=r"quantize.*only with format 'tflite'"):
        export_model(model_dir, str(tmp_path), quantize="int8")
    with pytest.raises(ConfigError, match=r"warmup.*-1.*integer >= 0"):
        export_model(model_dir, str(tmp_path), warmup=-1)
    assert not list(tmp_path.iterdir())                                  # nothing half-written
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "python"))
    proc = subprocess.run([sys.executable, "-m", "tpuestimator", "export", model_dir, "--format", "tflite",
                           "--quantize", "int4"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2
    assert "--quantize: invalid choice: 'int4'" in proc.stderr and "'int8'" in proc.stderr


def test_warmup_requests_hold_real_records_for_serving_default(trained, tmp_path):
    import tensorflow as tf

    from tpuestimator.jobs.model_dir_jobs import export_model
    from tpuestimator.serving import open_export
    from tpuestimator.serving.warmup import read_warmup_requests

    _, result = trained
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(DIGITS / "eval.tfrecord")).take(5)]
    job_requests = read_warmup_requests(result.export_dir)         # export.warmup: 3 in the job's config
    assert [r["inputs"]["examples"] for r in job_requests] == [[r] for r in records[:3]]
    path = export_model(result.model_dir, str(tmp_path), warmup=5).path
    requests = read_warmup_requests(path)
    assert len(requests) == 5
    assert all(r["signature"] == "serving_default" and r["model_name"] == "digits" for r in requests)
    assert [r["inputs"]["examples"] for r in requests] == [[r] for r in records]
    served = open_export(path).run("serving_default", [r["inputs"]["examples"][0] for r in requests])
    assert served["probabilities"].shape == (5, 10)                     # the requests are servable as written
    assert not (Path(path) / "assets.extra" / "tf_serving_warmup_requests.tmp").exists()


def test_warmup_beyond_what_tf_serving_reads_is_an_error(trained, tmp_path):
    from tpuestimator.errors import ConfigError
    from tpuestimator.jobs.model_dir_jobs import load_job_config, write_warmup

    cfg = load_job_config(trained[1].model_dir)
    with pytest.raises(ConfigError, match=r"export.warmup.*1001.*at most 1000"):
        write_warmup(str(tmp_path), cfg, 1001)
    with pytest.raises(ConfigError, match=r"export.warmup.*400.*at most the 360 records"):
        write_warmup(str(tmp_path), cfg, 400)
