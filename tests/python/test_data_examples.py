"""Bundled examples (digits, shapes) and an image folder -> TFRecords -> a training run that learns."""
from __future__ import annotations

import hashlib
import json
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

from tpuestimator.config import load_config
from tpuestimator.data import make_input_fn, num_classes, vocabulary, write_tfrecords
from tpuestimator.errors import ConfigError
from tpuestimator.examples import DIGITS_FILES, list_examples, write_example

REPO = Path(__file__).resolve().parents[2]
DIGITS = REPO / "python" / "tpuestimator" / "examples" / "digits"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_digits_example_is_the_real_optdigits_split_and_reproducible(tmp_path, monkeypatch):
    manifest = json.loads((DIGITS / "manifest.json").read_text())
    assert manifest["splits"]["train"]["count"] == 1437 and manifest["splits"]["eval"]["count"] == 360
    assert manifest["format"] == "mnist" and manifest["image"] == {"height": 8, "width": 8, "channels": 1}
    assert set(manifest["splits"]["eval"]["class_counts"].values()) <= {35, 36, 37}  # stratified
    # the script as `python scripts/make_digits.py --out DIR` runs it, in this process (a TensorFlow
    # start saved): its argv, its own module namespace, its exit status
    script = str(REPO / "scripts" / "make_digits.py")
    monkeypatch.setattr(sys, "argv", [script, "--out", str(tmp_path)])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(script, run_name="__main__")
    assert done.value.code == 0
    for name in DIGITS_FILES:
        assert digest(tmp_path / name) == digest(DIGITS / name), name


@pytest.mark.quick("examples")
def test_write_example_digits_reads_back(tmp_path):
    config = write_example("digits", tmp_path / "d")
    cfg = load_config(config)
    section = cfg.data
    assert cfg.model == "cnn" and num_classes(section) == 10 and vocabulary(section)[3] == "3"
    images, labels = [], []
    for f, lab in make_input_fn(section, "eval")({"batch_size": 100}):
        images.append(f["image"].numpy())
        labels.append(lab.numpy())
    images, labels = np.concatenate(images), np.concatenate(labels)
    assert images.shape == (360, 8, 8, 1) and np.bincount(labels).tolist().count(36) >= 6
    from sklearn.datasets import load_digits

    digits = load_digits()
    target = np.clip(np.rint(digits.images * 255 / 16), 0, 255)
    i = int(np.flatnonzero((target == np.rint(images[0, ..., 0] * 255)).all(axis=(1, 2)))[0])
    assert digits.target[i] == labels[0]  # the pixels and labels of the real digit


def test_shapes_example_is_generated_deterministically(tmp_path):
    a, b = write_example("shapes", tmp_path / "a"), write_example("shapes", tmp_path / "b")
    for name in ("train.tfrecord", "eval.tfrecord", "manifest.json", "labels.txt"):
        assert digest(tmp_path / "a" / name) == digest(tmp_path / "b" / name)
    cfg = load_config(a)
    assert cfg.model == "image_classifier" and vocabulary(cfg.data) == ["circle", "square", "triangle"]
    f, lab = next(iter(make_input_fn(cfg.data, "train")({"batch_size": 8, "seed": 0})))
    assert f["image"].shape == (8, 32, 32, 3) and lab.shape == (8,)
    assert set(list_examples()) == {"digits", "shapes", "fashion_mnist"} and Path(b).name == "shapes.yaml"
    with pytest.raises(ConfigError):
        write_example("mnist", tmp_path / "c")


def test_parity_fixture_config_loads():
    cfg = load_config(REPO / "tests" / "fixtures" / "parity" / "parity.yaml")
    section = cfg.data
    assert num_classes(section) == 3
    f, lab = next(iter(make_input_fn(section, "eval")({"batch_size": 24})))
    assert f["x"].shape == (24, 4) and sorted(np.bincount(lab.numpy()).tolist()) == [8, 8, 8]


@pytest.mark.slow
def test_image_folder_to_a_training_run_that_learns(tmp_path):
    from tpuestimator.examples.shapes import CLASSES, draw_shape
    from tpuestimator.jobs.job import run_job

    rng = np.random.default_rng(0)
    for cls in CLASSES:
        (tmp_path / "img" / cls).mkdir(parents=True)
        for i in range(60):
            draw_shape(cls, rng, size=24).save(tmp_path / "img" / cls / f"{i}.{'png' if i % 2 else 'jpg'}")
    manifest = write_tfrecords(tmp_path / "img", tmp_path / "records", split=0.25, shards=2, seed=0)
    assert manifest["image"] == {"height": 24, "width": 24, "channels": 3}
    config = {"name": "folder", "model": "image_classifier", "params": {"learning_rate": 0.003, "batch_norm": False},
              "data": {"manifest": manifest["path"], "image": {"height": 24, "width": 24, "scale": "symmetric"},
                       "augment": {"flip_left_right": True}},
              "train": {"batch_size": 32, "max_steps": 300, "iterations_per_loop": 50, "save_checkpoints_steps": 300},
              "eval": {"batch_size": 32}, "run": {"strategy": "cpu", "seed": 1}, "export": {"enabled": False}}
    result = run_job(config, model_dir=str(tmp_path / "model"), runs_dir=str(tmp_path / "runs"), export=False)
    assert result.metrics["num_examples"] == 45
    assert result.metrics["accuracy"] >= 0.8  # chance is 1/3; 1.0 with run seeds 1, 2 and 3
