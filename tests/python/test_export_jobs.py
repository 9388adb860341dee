"""Offline evaluation and batch prediction from an export (`export_jobs`, `batch_predict`,
`prediction_files`, the `evaluate EXPORT_DIR` and `predict --out` commands), against the
Estimator on the same records and scikit-learn's metrics.

Two tiny trainings, once per module: the digits example (10 classes, linear model) and a
binary `features` model on 256-float records (big enough records for the memory test).
"""
from __future__ import annotations

import base64
import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _train(config, tmp: Path, overrides=()):
    from tpuestimator.jobs.job import run_job

    return run_job(config, overrides=list(overrides), model_dir=str(tmp / "model"), runs_dir=str(tmp / "runs"))


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    from tpuestimator.examples import write_example

    tmp = tmp_path_factory.mktemp("digits")
    config = write_example("digits", tmp / "digits")
    result = _train(config, tmp, ["model=linear", "train.max_steps=60", "eval.every_n_steps=null",
                                  "export.exporters=[final]", "train.iterations_per_loop=20",
                                  "train.save_checkpoints_steps=60"])
    return {"tmp": tmp, "result": result, "eval": str(tmp / "digits" / "eval.tfrecord")}


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    from tpuestimator.data import write_tfrecords

    tmp = tmp_path_factory.mktemp("binary")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 256)).astype(np.float32)
    y = rng.integers(0, 2, 400)
    x[:, :8] += (1.5 * (2 * y - 1))[:, None]   # the label shows in the first 8 features
    manifest = write_tfrecords({"x": x}, tmp / "records", labels=y, split=0.25, seed=0)
    config = {"name": "binary", "model": "linear", "params": {"learning_rate": 0.05},
              # a 1 MB read buffer: both files of the memory test are bigger than it (an 8 MB buffer
              # fills with the 20 MB file, not the 2 MB one: a bounded difference a test would see)
              "data": {"manifest": manifest["path"], "read_buffer_mb": 1},
              "train": {"batch_size": 32, "max_steps": 40, "iterations_per_loop": 20, "save_checkpoints_steps": 40},
              "eval": {"batch_size": 32}, "run": {"strategy": "cpu", "seed": 1},
              "export": {"exporters": ["final"]}}
    result = _train(config, tmp)
    return {"tmp": tmp, "result": result, "eval": str(Path(manifest["path"]).parent / "eval-*.tfrecord"),
            "manifest": manifest}


def _estimator_outputs(result, pattern):
    """(labels, probabilities) of `Estimator.predict` over the eval pipeline of `pattern`."""
    from tpuestimator.jobs.from_config import build_estimator, input_fn_for
    from tpuestimator.jobs.model_dir_jobs import load_job_config

    cfg = load_job_config(result.model_dir)
    est = build_estimator(cfg, model_dir=result.model_dir)
    probs = np.stack([p["probabilities"] for p in est.predict(input_fn_for(cfg, "eval", pattern))])
    labels = np.concatenate([lab.numpy() for _, lab in input_fn_for(cfg, "eval", pattern)(
        {"batch_size": 64, "mode": "eval", "input_context": None, "seed": 0, "start_step": 0})])
    return labels, probs


def test_offline_evaluation_of_an_export_equals_estimator_evaluate_and_sklearn(digits):
    from sklearn.metrics import confusion_matrix, roc_auc_score

    from tpuestimator.jobs.export_jobs import evaluate_export
    from tpuestimator.jobs.model_dir_jobs import evaluate_job
    from tpuestimator.runs.validate import check_run_dir

    result = digits["result"]
    runs = digits["tmp"] / "eval-runs"
    got = evaluate_export(result.export_dir, data_pattern=digits["eval"], runs_dir=str(runs), batch_size=50)
    want = evaluate_job(result.model_dir, data_pattern=digits["eval"])
    assert got["num_examples"] == want["num_examples"] == 360
    # exactly the same examples right (the Estimator's metric is a float32)
    assert round(want["accuracy"] * 360) == np.trace(got["confusion_matrix"]) == round(got["accuracy"] * 360)
    assert np.float32(got["accuracy"]) == np.float32(want["accuracy"])
    assert got["log_loss"] == pytest.approx(want["loss"], rel=1e-5)
    labels, probs = _estimator_outputs(result, digits["eval"])
    assert abs(got["auc"] - roc_auc_score(labels, probs, multi_class="ovr", average="macro")) <= 1e-6
    cm = np.array(got["confusion_matrix"])
    assert cm.sum() == 360
    np.testing.assert_array_equal(cm, confusion_matrix(labels, probs.argmax(1), labels=range(10)))
    assert [r["class"] for r in got["per_class"]] == [str(i) for i in range(10)]
    # the run record: valid, with the metrics, the PNG and the per-class table
    run_dir = Path(got["run_dir"])
    assert check_run_dir(run_dir) == []
    evaluation = json.loads((run_dir / "tfruns.d" / "evaluation.json").read_text())
    assert evaluation["accuracy"] == got["accuracy"] and evaluation["auc"] == pytest.approx(got["auc"])
    props = run_dir / "tfruns.d" / "properties"
    assert (props / "type").read_text().strip() == "evaluation"
    assert (props / "completed").read_text().strip() == "TRUE" and (props / "samples").read_text().strip() == "360"
    with Image.open(run_dir / "confusion_matrix.png") as img:
        img.load()
        assert img.format == "PNG" and img.width > 200
    with open(run_dir / "per_class.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["support"]) for r in rows] == cm.sum(axis=1).tolist()
    assert float(rows[3]["recall"]) == pytest.approx(cm[3, 3] / cm[3].sum())
    # default data: the training's data.eval, from the export's metadata; no record
    again = evaluate_export(result.export_dir, record=False)
    assert again["accuracy"] == got["accuracy"] and "run_dir" not in again


def test_binary_export_auc_equals_sklearn(binary):
    from sklearn.metrics import roc_auc_score

    from tpuestimator.jobs.export_jobs import evaluate_export

    got = evaluate_export(binary["result"].export_dir, data_pattern=binary["eval"], record=False)
    labels, probs = _estimator_outputs(binary["result"], binary["eval"])
    assert got["num_examples"] == 100 and np.array(got["confusion_matrix"]).sum() == 100
    assert abs(got["auc"] - roc_auc_score(labels, probs[:, 1])) <= 1e-6
    assert got["auc"] > 0.7   # a trained model ranks the labels


def test_cli_evaluates_an_export_and_still_a_model_dir(digits, tmp_path, capsys):
    from tpuestimator.cli import main

    result = digits["result"]
    assert main(["evaluate", result.export_dir, "--runs-dir", str(tmp_path / "runs"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "auc" in out and "per class:" in out and "confusion matrix" in out and "run: " in out
    assert main(["evaluate", result.model_dir]) == 0
    assert "loss" in capsys.readouterr().out
    assert main(["evaluate", result.export_dir, "--set", "model=cnn", "--no-record"]) == 2
    assert "--set" in capsys.readouterr().err
    assert main(["evaluate", result.export_dir, "--data", str(tmp_path / "none-*.tfrecord"), "--no-record"]) == 2
    assert "none-*.tfrecord" in capsys.readouterr().err


def test_batch_predictions_equal_estimator_predict_in_csv_and_parquet(digits, tmp_path):
    import pandas as pd

    from tpuestimator.jobs.export_jobs import predict_columns, predict_to_file

    result = digits["result"]
    _, probs = _estimator_outputs(result, digits["eval"])
    csv_info = predict_to_file(result.export_dir, [digits["eval"]], tmp_path / "p.csv", batch_size=77)
    pq_info = predict_to_file(result.export_dir, [digits["eval"]], tmp_path / "p.parquet", batch_size=77)
    assert csv_info["rows"] == pq_info["rows"] == 360
    frames = [pd.read_csv(tmp_path / "p.csv"), pd.read_parquet(tmp_path / "p.parquet")]
    prob_cols = [f"prob_{i}" for i in range(10)]
    for df in frames:
        assert list(df.columns) == ["source", "index", "class_id", "class", *prob_cols]
        assert df["index"].tolist() == list(range(360)) and set(df["source"]) == {digits["eval"]}
        np.testing.assert_allclose(df[prob_cols].to_numpy(), probs, atol=1e-6)
        assert df["class_id"].tolist() == probs.argmax(1).tolist()
        assert df["class"].astype(str).tolist() == [str(c) for c in probs.argmax(1)]
    np.testing.assert_allclose(frames[0][prob_cols].to_numpy(), frames[1][prob_cols].to_numpy(), atol=1e-7)
    copy = tmp_path / "copy.tfrecord"
    copy.write_bytes(Path(digits["eval"]).read_bytes())
    cols = predict_columns(result.export_dir, [digits["eval"], str(copy)], batch_size=77)   # batches span files
    assert cols["source"] == [digits["eval"]] * 360 + [str(copy)] * 360
    assert cols["index"] == list(range(360)) * 2
    assert cols["class_id"] == frames[1]["class_id"].tolist() * 2
    copy.unlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.csv", "p.parquet"]   # no temporary file left


def test_image_files_predict_like_their_records(digits, tmp_path):
    from tpuestimator.data import make_input_fn, resolve_section
    from tpuestimator.jobs.export_jobs import predict_columns
    from tpuestimator.jobs.model_dir_jobs import load_job_config

    cfg = load_job_config(digits["result"].model_dir)
    section = resolve_section(cfg.data).replace(eval=digits["eval"])
    images = next(iter(make_input_fn(section, "eval")({"batch_size": 4})))[0]["image"].numpy()
    for i, img in enumerate(images):   # 8x8 grey, pixels k/255: PNG keeps them exactly
        Image.fromarray(np.rint(img[..., 0] * 255).astype(np.uint8)).save(tmp_path / f"{i}.png")
    from_images = predict_columns(digits["result"].export_dir, [str(tmp_path / "*.png")])
    from_records = predict_columns(digits["result"].export_dir, [digits["eval"]])
    assert from_images["source"] == [str(tmp_path / f"{i}.png") for i in range(4)]
    np.testing.assert_allclose(from_images["prob_3"], from_records["prob_3"][:4], atol=1e-5)


def test_cli_predict_writes_a_file_and_bad_input_is_a_clear_error_leaving_nothing(digits, tmp_path, capsys):
    from tpuestimator.cli import main
    from tpuestimator.errors import ConfigError, DataError
    from tpuestimator.jobs.export_jobs import predict_to_file

    export = digits["result"].export_dir
    out = tmp_path / "preds.csv"
    assert main(["predict", export, digits["eval"], "--out", str(out), "--batch-size", "100"]) == 0
    captured = capsys.readouterr()
    assert "360 rows" in captured.out and len(out.read_text().splitlines()) == 361
    assert "records" not in captured.err   # stderr is not a terminal here: no progress bar
    assert main(["predict", export, digits["eval"], "--limit", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and json.loads(lines[1])["index"] == 1
    with pytest.raises(ConfigError, match="csv or .parquet"):
        predict_to_file(export, [digits["eval"]], tmp_path / "p.json")
    with pytest.raises(DataError, match="nothing-"):
        predict_to_file(export, [str(tmp_path / "nothing-*.tfrecord")], tmp_path / "q.csv")
    corrupt = tmp_path / "corrupt.tfrecord"
    corrupt.write_bytes(Path(digits["eval"]).read_bytes()[:-7])   # a cut record at the end
    with pytest.raises(DataError):
        predict_to_file(export, [digits["eval"], str(corrupt)], tmp_path / "r.csv", batch_size=100)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corrupt.tfrecord", "preds.csv"]   # nothing half-written
    assert main(["predict", export, digits["eval"], "--out", str(tmp_path / "x.txt")]) == 2


def test_predict_on_a_file_that_is_not_tfrecord_names_it_and_writes_nothing(digits, tmp_path, capsys):
    """Issue 19.1: a 7-byte text file (shorter than a record's header) read as no records at
    all, and 7 stray bytes after the last record were dropped: both are a DataError naming the
    file, and `--out` writes nothing."""
    from tpuestimator.cli import main
    from tpuestimator.errors import DataError
    from tpuestimator.jobs.export_jobs import predict_to_file

    export = digits["result"].export_dir
    garbage = tmp_path / "garbage.tfrecord"
    garbage.write_text("garbage")
    out = tmp_path / "p.csv"
    assert main(["predict", export, str(garbage), "--out", str(out)]) != 0
    err = capsys.readouterr().err
    assert "garbage.tfrecord" in err and "not a TFRecord file" in err, err
    assert main(["predict", export, digits["eval"], str(garbage)]) != 0
    captured = capsys.readouterr()
    assert captured.out == "" and "garbage.tfrecord" in captured.err   # checked before any prediction
    tail = tmp_path / "tail.tfrecord"
    tail.write_bytes(Path(digits["eval"]).read_bytes() + b"garbage")
    with pytest.raises(DataError, match="tail.tfrecord") as caught:
        predict_to_file(export, [str(tail)], tmp_path / "q.csv", batch_size=100)
    assert caught.value.path == str(tail) and "7 bytes after its last record" in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["garbage.tfrecord", "tail.tfrecord"]


def test_the_progress_bar_shows_on_a_terminal_unless_quiet(digits, tmp_path, monkeypatch):
    from tpuestimator.cli import main

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    for quiet, shown in ((False, True), (True, False)):
        term = Terminal()
        monkeypatch.setattr(sys, "stderr", term)
        args = ["predict", digits["result"].export_dir, digits["eval"], "--out", str(tmp_path / "p.csv")]
        assert main(args + (["--quiet"] if quiet else [])) == 0
        assert ("360 records" in term.getvalue()) is shown, term.getvalue()


def test_parquet_without_pyarrow_names_the_extra(digits, tmp_path, monkeypatch):
    from tpuestimator.errors import ConfigError
    from tpuestimator.serving.prediction_files import PredictionFileWriter

    monkeypatch.setitem(sys.modules, "pyarrow", None)   # as if pyarrow were not installed
    with pytest.raises(ConfigError, match=r"tpuestimator\[parquet\]"):
        PredictionFileWriter(tmp_path / "p.parquet")
    assert list(tmp_path.iterdir()) == []


_RSS_SCRIPT = """
import sys
from tpuestimator.jobs.export_jobs import predict_to_file

def status(key):   # MB
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(key)) / 1024

predict_to_file(sys.argv[1], [sys.argv[2]], sys.argv[2] + ".warm.csv", batch_size=256)   # load, trace
for path in sys.argv[2:]:
    open("/proc/self/clear_refs", "w").write("5")   # resets the peak (VmHWM) to the current RSS
    before = status("VmRSS")
    info = predict_to_file(sys.argv[1], [path], path + ".csv", batch_size=256)
    print(info["rows"], status("VmHWM") - before)
"""


def _records(src_pattern: str, n: int, path: Path) -> None:
    import tensorflow as tf

    source = [r.numpy() for r in tf.data.TFRecordDataset(tf.io.gfile.glob(src_pattern))]
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in range(n):
            writer.write(source[i % len(source)])


def test_batch_prediction_memory_stays_flat_in_the_number_of_records(binary, tmp_path, python_env):
    """The peak RSS while predicting 20,000 records (20 MB of features) exceeds the RSS before by
    less than 6 MB more than for 2,000 records: holding the records or the predictions would add
    18 MB or more. The peak is reset before each run (/proc/self/clear_refs), so the start-up's
    own peak (TensorFlow, loading the export) does not hide the growth."""
    files = []
    for n in (2000, 20000):
        _records(binary["eval"], n, tmp_path / f"{n}.tfrecord")
        files.append(str(tmp_path / f"{n}.tfrecord"))
    assert os.path.getsize(files[1]) > 20e6
    proc = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, binary["result"].export_dir, *files, *files],
                          env=python_env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = [line.split() for line in proc.stdout.strip().splitlines()[-4:]]
    assert [int(r[0]) for r in runs] == [2000, 20000] * 2
    growth = [max(float(r[1]) for r in runs[0::2]), min(float(r[1]) for r in runs[1::2])]
    assert growth[1] < growth[0] + 6, (growth, runs)


def test_an_export_with_only_the_features_signature_reads_records_with_the_data_layer(digits, tmp_path):
    """Exports from before the three signatures (`serving_default` = decoded features): records are
    decoded by the data layer, images by `decode_image_files`; the same predictions."""
    from tpuestimator.jobs.export_jobs import predict_columns
    from tpuestimator.jobs.from_config import build_estimator, input_fn_for
    from tpuestimator.jobs.model_dir_jobs import load_job_config
    from tpuestimator.serving.batch_predict import ExportPredictor
    from tpuestimator.serving.exports import write_export_metadata
    from tpuestimator.spec import Mode

    cfg = load_job_config(digits["result"].model_dir)
    est = build_estimator(cfg, model_dir=digits["result"].model_dir)
    est.build(input_fn_for(cfg, "eval"), Mode.EVAL)
    old = est.export_saved_model(str(tmp_path / "old"), version=1)   # no serving_inputs
    write_export_metadata(old, cfg, est)
    predictor = ExportPredictor(old)
    assert not predictor.takes_examples and not predictor.takes_image_bytes
    new = ExportPredictor(digits["result"].export_dir)
    assert new.takes_examples and new.features_signature == "features"
    ours = predict_columns(old, digits["eval"])
    theirs = predict_columns(digits["result"].export_dir, digits["eval"])
    assert ours["class_id"] == theirs["class_id"]
    np.testing.assert_allclose(ours["prob_7"], theirs["prob_7"], atol=1e-6)
    # JPEG and PNG files: decoded in Python for the old export, by the image_bytes signature for the new
    rng = np.random.default_rng(0)
    for i, fmt in enumerate(("JPEG", "PNG")):
        Image.fromarray(rng.integers(0, 256, (8, 8), dtype=np.uint8)).save(tmp_path / f"{i}.{fmt.lower()}", fmt)
    images = [str(tmp_path / "0.jpeg"), str(tmp_path / "1.png")]
    ours, theirs = predict_columns(old, images), predict_columns(digits["result"].export_dir, images)
    assert ours["source"] == theirs["source"] == images
    for j in range(10):
        np.testing.assert_allclose(ours[f"prob_{j}"], theirs[f"prob_{j}"], atol=1e-5)


def _tf_serving_row_format(body: dict, export) -> dict:
    """What TF Serving's REST predict API hands the signature for a row-format body: the
    `instances` stacked per input, `{"b64": ...}` decoded to bytes (tensorflow_serving's
    json_tensor.cc: a one-input signature takes bare values, several inputs take objects)."""
    def value(v):
        return base64.b64decode(v["b64"]) if isinstance(v, dict) and set(v) == {"b64"} else v

    specs = export.input_specs(body.get("signature_name", "serving_default"))
    instances = body["instances"]
    if len(specs) == 1 and not (isinstance(instances[0], dict) and set(instances[0]) == set(specs)):
        tensors = {next(iter(specs)): [value(v) for v in instances]}
    else:
        tensors = {name: [value(inst[name]) for inst in instances] for name in specs}
    # TF Serving feeds each stacked input to the signature's placeholder, which refuses another
    # shape; a signature loaded in Python does not check (a [None, 1] input takes a [n] batch)
    for name, values in tensors.items():
        shape = np.shape(np.asarray(values, dtype=object))
        assert specs[name].shape.is_compatible_with(shape), (name, specs[name].shape, shape)
    return tensors


def test_the_readme_rest_request_bodies_are_accepted_by_the_signatures(digits, tmp_path):
    """docs/deploying.md's TF Serving requests, built as written there (the shell line run by bash, the
    Python lines run), go through the loaded signatures and give the predictions of the records."""
    from tpuestimator.data import make_input_fn, resolve_section
    from tpuestimator.jobs.export_jobs import predict_columns
    from tpuestimator.jobs.model_dir_jobs import load_job_config
    from tpuestimator.serving import open_export

    page = (REPO / "docs" / "deploying.md").read_text()
    deploy = page[page.index("\n## TF Serving\n"):page.index("\n## LiteRT")]
    assert "docker run -p 8501:8501 -v" in deploy and "-e MODEL_NAME=digits tensorflow/serving" in deploy
    printf = next(line for line in deploy.splitlines() if line.startswith("printf "))
    python_block = deploy[deploy.index("```python") + len("```python"):]
    python_block = python_block[:python_block.index("request = urllib")]
    cfg = load_job_config(digits["result"].model_dir)
    image = next(iter(make_input_fn(resolve_section(cfg.data).replace(eval=digits["eval"]), "eval")({"batch_size": 1})))
    Image.fromarray(np.rint(image[0]["image"].numpy()[0, ..., 0] * 255).astype(np.uint8)).save(tmp_path / "digit.png")
    subprocess.run(["bash", "-c", printf], cwd=tmp_path, check=True)
    image_body = json.loads((tmp_path / "request.json").read_text())
    scope: dict = {}
    exec(python_block.replace("digits/eval.tfrecord", digits["eval"]), scope)   # noqa: S102 (the page's lines)
    example_body = scope["body"]
    export = open_export(digits["result"].export_dir)
    records = predict_columns(digits["result"].export_dir, digits["eval"])
    out = export.run(image_body["signature_name"], _tf_serving_row_format(image_body, export))
    np.testing.assert_allclose(out["probabilities"][0], [records[f"prob_{j}"][0] for j in range(10)], atol=1e-5)
    out = export.run(example_body["signature_name"], _tf_serving_row_format(example_body, export))
    assert out["class_id"].tolist() == records["class_id"][:2] and out["class"].tolist() == records["class"][:2]


def test_the_deploying_page_open_export_block_runs_each_signature_on_the_same_digit(digits, tmp_path, monkeypatch):
    """docs/deploying.md's `open_export` lines, as written (the export path and the user's inputs
    filled in): the three signatures, fed one eval digit as a record, a PNG and decoded features,
    give that digit's class as batch prediction does."""
    import ast

    import tensorflow as tf

    from tpuestimator.data import make_input_fn, resolve_section
    from tpuestimator.jobs.export_jobs import predict_columns
    from tpuestimator.jobs.model_dir_jobs import load_job_config

    page = (REPO / "docs" / "deploying.md").read_text()
    block = next(b.split("```", 1)[0] for b in page.split("```python\n")[1:] if "open_export(" in b)
    tree = ast.parse(block.replace("models/digits/export/final/1500", str(digits["result"].export_dir)))
    # each bare `export.run(...)` line keeps its result, so the test can compare them
    tree.body = [ast.Expr(ast.Call(ast.Attribute(ast.Name("outputs", ast.Load()), "append", ast.Load()), [n.value], []))
                 if isinstance(n, ast.Expr) else n for n in tree.body]
    ast.fix_missing_locations(tree)
    assert len([n for n in tree.body if isinstance(n, ast.Expr)]) == 3
    cfg = load_job_config(digits["result"].model_dir)
    features, _ = next(iter(make_input_fn(resolve_section(cfg.data).replace(eval=digits["eval"]), "eval")({"batch_size": 1})))
    images = features["image"].numpy()[:1]
    Image.fromarray(np.rint(images[0, ..., 0] * 255).astype(np.uint8)).save(tmp_path / "3.png")
    record_bytes = next(iter(tf.data.TFRecordDataset(digits["eval"]))).numpy()
    monkeypatch.chdir(tmp_path)
    scope = {"outputs": [], "record_bytes": record_bytes, "images": images}
    exec(compile(tree, "docs/deploying.md", "exec"), scope)  # noqa: S102 (the page's lines)
    expected = predict_columns(digits["result"].export_dir, digits["eval"])["class_id"][0]
    assert [int(out["class_id"][0]) for out in scope["outputs"]] == [expected] * 3
    np.testing.assert_allclose(scope["outputs"][0]["probabilities"], scope["outputs"][2]["probabilities"], atol=1e-5)


def test_a_signature_input_of_the_wrong_shape_or_type_is_refused_naming_it(digits):
    """docs/deploying.md: `export.run` refuses a batch the signature cannot take, naming the input,
    what it got and the shape it takes, instead of TensorFlow's error about binding arguments."""
    from tpuestimator.errors import ConfigError
    from tpuestimator.serving import open_export

    export = open_export(str(digits["result"].export_dir))
    for bad, got in ((np.zeros((2, 64), "float32"), r"\(2, 64\)"), (np.zeros((2, 8, 8), "float32"), r"\(2, 8, 8\)"),
                     (np.zeros((8, 8, 1), "float32"), r"\(8, 8, 1\)")):
        with pytest.raises(ConfigError, match=rf"`inputs\.image`.*shape {got}.*shape \(n, 8, 8, 1\) for the signature 'features'"):
            export.run("features", {"image": bad})
    with pytest.raises(ConfigError, match=r"`inputs\.image`.*dtype float32, shape \(n, 8, 8, 1\)"):
        export.run("features", {"image": [[["a"] * 8] * 8]})
    # a batch of any size with the right shape runs: its rows are the classes of its images
    images = np.zeros((3, 8, 8, 1), "float32")
    images[1] = 1.0
    out = export.run("features", {"image": images})
    assert out["probabilities"].shape == (3, 10)
    assert out["class_id"][0] == out["class_id"][2]
    np.testing.assert_allclose(out["probabilities"].sum(axis=1), 1.0, atol=1e-5)


def _page_cli_lines(page: str, first: str) -> list[list[str]]:
    """The command lines (as argv, comments dropped) of the bash block of docs/`page` that starts with `first`."""
    import shlex

    text = (REPO / "docs" / page).read_text()
    block = next(b.split("```", 1)[0] for b in text.split("```bash\n")[1:] if b.startswith(first))
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]


def test_the_evaluation_and_batch_prediction_pages_commands_run(digits, tmp_path, monkeypatch, capsys):
    """docs/evaluation.md's and docs/deploying.md's batch-prediction commands, as written (run in-process
    from a folder holding the user's files: models/digits and its export, new/*.tfrecord, photos/*.jpg,
    digits/eval.tfrecord), each exit 0 and leave what the page says."""
    import shutil

    import pandas as pd

    from tpuestimator.cli import main

    result = digits["result"]
    export = "models/digits/export/final/1500"
    shutil.copytree(result.model_dir, tmp_path / "models" / "digits", ignore=shutil.ignore_patterns("export", "*.lock"))
    shutil.copytree(result.export_dir, tmp_path / export)
    for folder in ("new", "digits"):
        (tmp_path / folder).mkdir()
    shutil.copy(digits["eval"], tmp_path / "new" / "a.tfrecord")
    shutil.copy(digits["eval"], tmp_path / "digits" / "eval.tfrecord")
    (tmp_path / "photos").mkdir()
    for i in range(2):
        Image.fromarray(np.full((8, 8), 40 * i, np.uint8)).save(tmp_path / "photos" / f"{i}.jpg")
    monkeypatch.chdir(tmp_path)
    commands = _page_cli_lines("evaluation.md", "tpuestimator evaluate") + _page_cli_lines("deploying.md", "tpuestimator predict")
    assert len(commands) == 6 and all(argv[0] == "tpuestimator" for argv in commands)
    for argv in commands:
        assert main(argv[1:]) == 0, argv
    out = capsys.readouterr().out
    assert "confusion matrix" in out and len([line for line in out.splitlines() if line.startswith("{")]) == 3
    assert len(pd.read_csv("preds.csv")) == 360
    assert len(pd.read_parquet("preds.parquet")) == 2 and (tmp_path / "runs").is_dir()
