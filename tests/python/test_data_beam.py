"""The Beam writer (DirectRunner) writes the same records as the local writer."""
from __future__ import annotations

import collections
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tpuestimator.data import write_tfrecords

beam = pytest.importorskip("apache_beam")
REPO = Path(__file__).resolve().parents[2]


def records(manifest: dict) -> dict[str, collections.Counter]:
    folder = os.path.dirname(manifest["path"])
    return {split: collections.Counter(r.numpy() for name in info["files"]
                                       for r in tf.data.TFRecordDataset(os.path.join(folder, name)))
            for split, info in manifest["splits"].items()}


def without_path(manifest: dict) -> dict:
    return {k: v for k, v in manifest.items() if k != "path"}


def test_beam_direct_runner_matches_local_writer_on_an_image_folder(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    for cls in ["a", "b", "c"]:
        (tmp_path / "img" / cls).mkdir(parents=True)
        for i in range(4):
            Image.fromarray(rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)).save(
                tmp_path / "img" / cls / f"{i}.{'png' if i % 2 else 'jpg'}")
    local = write_tfrecords(tmp_path / "img", tmp_path / "local", shards=2, split=0.25)
    beamed = write_tfrecords(tmp_path / "img", tmp_path / "beam", shards=2, split=0.25, beam=True,
                             runner="DirectRunner", pipeline_options=["--direct_num_workers=1"])
    assert records(beamed) == records(local)
    assert sum(records(local)["train"].values()) == 9
    assert without_path(beamed) == without_path(local)
    assert sorted(os.listdir(tmp_path / "beam")) == sorted(os.listdir(tmp_path / "local"))


def test_beam_matches_local_writer_on_typed_features(tmp_path):
    data = {"x": np.arange(40, dtype=np.float32).reshape(20, 2), "tag": np.array([f"t{i}" for i in range(20)])}
    labels = np.arange(20) % 2
    local = write_tfrecords(data, tmp_path / "local", labels=labels, shards=3)
    beamed = write_tfrecords(data, tmp_path / "beam", labels=labels, shards=3, beam=True)
    assert records(beamed) == records(local)
    assert without_path(beamed) == without_path(local)


def test_the_local_writer_does_not_import_beam(tmp_path, forked_python, python_env):
    # a process of its own whose server imported TensorFlow and Keras only (never Beam): what the
    # writer imports is the run's own import
    code = ("import sys, numpy as np; from tpuestimator.data import write_tfrecords; "
            f"write_tfrecords({{'x': np.zeros((4, 2))}}, {str(tmp_path / 'o')!r}, labels=[0, 1, 0, 1]); "
            "assert 'apache_beam' not in sys.modules")
    proc = subprocess.run([forked_python, "-c", code], cwd=REPO, capture_output=True, text=True, env=python_env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list((tmp_path / "o").glob("*.tfrecord")), sorted(p.name for p in (tmp_path / "o").iterdir())
