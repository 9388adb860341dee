"""`data inspect` and `data bench` on the fixtures and examples."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf
from PIL import Image

from tpuestimator.data.bench import bench, input_wait_share
from tpuestimator.data.inspect import inspect
from tpuestimator.examples import write_example

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def test_inspect_sniffs_seed002_records_and_writes_a_grid(tmp_path):
    report = inspect(str(FIX / "mnist_good.tfrecord"), n=5, grid_path=str(tmp_path / "g.png"))
    assert report["format"] == "mnist" and report["records"] == 12
    assert report["model_features"] == {"image": {"shape": [8, 8, 1], "dtype": "float32"}}
    assert report["class_counts"] == {"0": 4, "1": 4, "2": 4}
    assert [e["label"] for e in report["examples"]] == [0, 1, 2, 0, 1]
    grid = Image.open(tmp_path / "g.png")
    assert grid.size == (5 * 96, 96 + 14)


def test_inspect_sniffs_typed_features_and_reports_corruption():
    report = inspect(str(FIX / "negative_pixel.tfrecord"), n=2)
    assert report["format"] == "features" and report["spec"]["pixels"] == {"dtype": "float32", "shape": [16],
                                                                            "kind": "numeric"}
    assert report["examples"][0]["features"]["pixels"]["shape"] == [16] and report["grid"] is None
    bad = inspect(str(FIX / "corrupt.tfrecord"), n=2)
    assert bad["corrupt"] == {str(FIX / "corrupt.tfrecord"): 5} and bad["records"] == 5


def test_inspect_a_config_names_classes(tmp_path):
    config = write_example("digits", tmp_path / "d")
    report = inspect(config, n=3, mode="eval")
    assert report["records"] == 360 and report["vocabulary"][9] == "9"
    assert sum(report["class_counts"].values()) == 360 and not report["problems"]
    wrong = inspect(str(FIX / "flowers_good.tfrecord"), n=2)
    assert wrong["format"] == "flowers" and wrong["model_features"]["image"]["shape"] == [12, 10, 3]


def test_bench_reports_rates_and_advice(tmp_path):
    config = write_example("digits", tmp_path / "d")
    report = bench(config, seconds=0.2)
    assert report["batch_size"] == 64 and report["pipeline"]["records_per_s"] > 0
    assert report["raw_read"]["records_per_s"] > 0 and report["advice"]
    share = input_wait_share(tf.data.Dataset.from_tensors((tf.zeros([2]), tf.zeros([2]))).repeat(),
                             lambda x, y: tf.reduce_sum(x + y), steps=5)
    assert 0.0 <= share["share"] <= 1.0 and np.isfinite(share["step_s"])
