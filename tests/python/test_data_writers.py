"""TFRecord writers: image folders, arrays, CSV, data frames; manifests; atomic writes; the CLI."""
from __future__ import annotations

import argparse
import io
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from PIL import Image

from tpuestimator.commands import data as data_cmd
from tpuestimator.data import make_input_fn, write_tfrecords
from tpuestimator.errors import DataError


def make_folder(root: Path, classes=("cat", "dog", "emu"), per_class=5, size=(9, 7), seed=0) -> dict[str, bytes]:
    """Class subfolders mixing JPEG and PNG; returns {file bytes: class}."""
    rng = np.random.default_rng(seed)
    files = {}
    for k, cls in enumerate(classes):
        (root / cls).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            img = Image.fromarray(np.full((*size, 3), 40 * k, np.uint8) + rng.integers(0, 20, (*size, 3), dtype=np.uint8))
            ext = "png" if i % 2 else "jpg"
            path = root / cls / f"img{i}.{ext}"
            img.save(path)
            files[path.read_bytes()] = cls
    return files


def read_split(manifest: dict, split: str) -> list[tf.train.Example]:
    folder = os.path.dirname(manifest["path"])
    out = []
    for name in manifest["splits"][split]["files"]:
        out += [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(os.path.join(folder, name))]
    return out


def feature(ex, key):
    f = ex.features.feature[key]
    return getattr(f, f.WhichOneof("kind")).value


def test_image_folder_jpeg_and_png_to_seed000_records(tmp_path):
    files = make_folder(tmp_path / "img")
    manifest = write_tfrecords(tmp_path / "img", tmp_path / "out", split=0.2, shards=2, seed=0)
    assert manifest["format"] == "flowers" and manifest["vocabulary"] == ["cat", "dog", "emu"]
    assert manifest["splits"]["train"]["class_counts"] == {"cat": 4, "dog": 4, "emu": 4}
    assert manifest["splits"]["eval"]["class_counts"] == {"cat": 1, "dog": 1, "emu": 1}
    assert manifest["image"] == {"height": 9, "width": 7, "channels": 3}
    assert len(manifest["splits"]["train"]["files"]) == 2
    seen = []
    for split in ("train", "eval"):
        for ex in read_split(manifest, split):
            data = feature(ex, "image/encoded")[0]
            label = feature(ex, "image/class/label")[0]
            text = feature(ex, "image/class/text")[0].decode()
            assert files[data] == text == manifest["vocabulary"][label - 1]  # original bytes, ids from 1
            seen.append(data)
    assert sorted(seen) == sorted(files)  # every image exactly once
    images, labels = [], []
    for f, lab in make_input_fn({"manifest": manifest["path"]}, "eval")({"batch_size": 8}):
        images.append(f["image"].numpy())
        labels += lab.numpy().tolist()
    assert sorted(labels) == [0, 1, 2] and np.concatenate(images).shape == (3, 9, 7, 3)


def test_folder_split_and_determinism(tmp_path):
    make_folder(tmp_path / "src" / "train", per_class=3)
    make_folder(tmp_path / "src" / "eval", per_class=1, seed=1)
    m = write_tfrecords(tmp_path / "src", tmp_path / "a")  # train/ + eval/ -> split by folder
    assert m["splits"]["train"]["count"] == 9 and m["splits"]["eval"]["count"] == 3
    again = write_tfrecords(tmp_path / "src", tmp_path / "b")
    for name in m["splits"]["train"]["files"]:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    make_folder(tmp_path / "flat", per_class=10)
    s0 = write_tfrecords(tmp_path / "flat", tmp_path / "s0", seed=0)
    s1 = write_tfrecords(tmp_path / "flat", tmp_path / "s1", seed=1)
    ev = lambda m: sorted(feature(e, "image/encoded")[0] for e in read_split(m, "eval"))  # noqa: E731
    assert ev(s0) != ev(s1) and len(ev(s0)) == len(ev(s1)) == 6
    assert again["splits"] == m["splits"]


def test_resize_option_reencodes_as_jpeg(tmp_path):
    make_folder(tmp_path / "img", per_class=2)
    m = write_tfrecords(tmp_path / "img", tmp_path / "out", split=0, image_size=(4, 6))
    assert m["image"] == {"height": 4, "width": 6, "channels": 3} and "eval" not in m["splits"]
    img = Image.open(io.BytesIO(feature(read_split(m, "train")[0], "image/encoded")[0]))
    assert img.format == "JPEG" and img.size == (6, 4)


def test_bad_folders_raise_data_error(tmp_path):
    with pytest.raises(DataError, match="nope: no such file or folder"):
        write_tfrecords(tmp_path / "nope", tmp_path / "out")
    make_folder(tmp_path / "img", per_class=2)
    (tmp_path / "img" / "empty").mkdir()
    with pytest.raises(DataError, match=r"img/empty: class 'empty' has no JPEG or PNG images") as info:
        write_tfrecords(tmp_path / "img", tmp_path / "out")
    assert info.value.path.endswith("empty")
    (tmp_path / "img" / "empty").rmdir()
    (tmp_path / "img" / "cat" / "broken.jpg").write_bytes(b"definitely not a jpeg")
    with pytest.raises(DataError, match=r"broken\.jpg: cannot read the image"):
        write_tfrecords(tmp_path / "img", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_interrupted_write_leaves_nothing(tmp_path):
    make_folder(tmp_path / "img", per_class=4)
    good = (tmp_path / "img" / "dog" / "img0.jpg").read_bytes()
    (tmp_path / "img" / "dog" / "img0.jpg").write_bytes(good[: len(good) // 2])  # header ok, data truncated
    with pytest.raises(DataError, match="img0.jpg"):
        write_tfrecords(tmp_path / "img", tmp_path / "out", shards=2)
    assert sorted(os.listdir(tmp_path)) == ["img"]  # no output folder, no temp files


def test_a_write_interrupted_between_shards_leaves_nothing(tmp_path, monkeypatch):
    """The bad image above is refused while the write is planned, before any shard exists; here
    a Ctrl-C lands while the records are written (after the first shard is complete)."""
    from tpuestimator.data import encode

    make_folder(tmp_path / "img", per_class=4)
    encode_one = encode.RecordEncoder.__call__
    encoded = []

    def interrupted_after_seven(self, item):
        if len(encoded) == 7:
            raise KeyboardInterrupt
        encoded.append(item)
        return encode_one(self, item)

    monkeypatch.setattr(encode.RecordEncoder, "__call__", interrupted_after_seven)
    with pytest.raises(KeyboardInterrupt):
        write_tfrecords(tmp_path / "img", tmp_path / "out", shards=2, split=0)
    assert len(encoded) == 7   # 12 images in 2 shards: the first (6) written, the second begun
    assert sorted(os.listdir(tmp_path)) == ["img"]  # no output folder, no staging folder, no temp files


def test_overwrite(tmp_path):
    make_folder(tmp_path / "img", per_class=2)
    write_tfrecords(tmp_path / "img", tmp_path / "out", shards=3, split=0)
    with pytest.raises(DataError, match="already holds a manifest.json"):
        write_tfrecords(tmp_path / "img", tmp_path / "out")
    m = write_tfrecords(tmp_path / "img", tmp_path / "out", shards=1, split=0, overwrite=True)
    assert sorted(os.listdir(tmp_path / "out")) == ["manifest.json", "train-00000-of-00001.tfrecord"]
    assert m["splits"]["train"]["count"] == 6


def test_numpy_images_and_labels_to_mnist_format(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (40, 5, 5), dtype=np.uint8)
    labels = np.arange(40) % 4
    m = write_tfrecords(images, tmp_path / "out", labels=labels, split=0.25, seed=3)
    assert m["format"] == "mnist" and m["image"] == {"height": 5, "width": 5, "channels": 1}
    assert m["splits"]["eval"]["class_counts"] == {"0": 2, "1": 2, "2": 2, "3": 2}
    for f, lab in make_input_fn({"manifest": m["path"]}, "eval")({"batch_size": 10}):
        for img, y in zip(f["image"].numpy(), lab.numpy()):
            i = int(np.flatnonzero((images == np.rint(img[..., 0] * 255)).all(axis=(1, 2)))[0])
            assert labels[i] == y


def test_integer_image_arrays_as_r_sends_them(tmp_path):
    images = np.arange(20 * 8 * 8, dtype=np.int32).reshape(20, 8, 8) % 256
    m = write_tfrecords({"image": images, "label": np.arange(20, dtype=np.int32) % 2}, tmp_path / "out",
                        format="mnist", split=0.2)
    assert m["format"] == "mnist" and m["image"] == {"height": 8, "width": 8, "channels": 1}
    assert m["splits"]["eval"]["count"] == 4
    with pytest.raises(DataError, match="holds pixels from 45 to 300"):
        write_tfrecords({"image": images + 45, "label": np.zeros(20, int)}, tmp_path / "bad", format="mnist")


def test_data_frame_with_factor_label_and_declared_dtypes(tmp_path):
    df = pd.DataFrame({"a": [0.5, 1.5, 2.5, 3.5], "b": [1, 2, 3, 4], "s": ["x", "y", "x", "z"],
                       "y": pd.Categorical(["lo", "hi", "hi", "lo"], categories=["lo", "hi"])})
    m = write_tfrecords(df, tmp_path / "out", label="y", split=0, features={"b": {"dtype": "float32"}})
    assert m["vocabulary"] == ["lo", "hi"]  # factor levels keep their order
    assert m["features"] == {"a": {"dtype": "float32", "shape": []}, "b": {"dtype": "float32", "shape": []},
                             "s": {"dtype": "string", "shape": []}}
    rows = sorted((feature(e, "a")[0], feature(e, "b")[0], feature(e, "s")[0], feature(e, "y")[0])
                  for e in read_split(m, "train"))
    assert rows == [(0.5, 1.0, b"x", 0), (1.5, 2.0, b"y", 1), (2.5, 3.0, b"x", 1), (3.5, 4.0, b"z", 0)]
    bad = df.assign(a=["1", "2", "oops", "4"])
    with pytest.raises(DataError, match=r"column 'a' row 2 holds 'oops', which is not a number"):
        write_tfrecords(bad, tmp_path / "bad", label="y", features={"a": {"dtype": "float32"}})
    with pytest.raises(DataError, match="different lengths"):
        write_tfrecords({"x": np.zeros((3, 2))}, tmp_path / "bad", labels=[0, 1])


def test_csv_and_npz_sources(tmp_path):
    csv = tmp_path / "d.csv"
    csv.write_text("x1,x2,name,label\n0.5,1,a,cat\n1.5,2,b,dog\n2.5,3,c,cat\n")
    m = write_tfrecords(csv, tmp_path / "c", split=0, vocabulary=["cat", "dog"])
    assert m["features"] == {"x1": {"dtype": "float32", "shape": []}, "x2": {"dtype": "int64", "shape": []},
                             "name": {"dtype": "string", "shape": []}}
    assert m["splits"]["train"]["class_counts"] == {"cat": 2, "dog": 1}
    csv.write_text("x1,label\n0.5,0\nnan?,1\n")
    with pytest.raises(DataError, match=r"d\.csv: column 'x1' row 2 holds 'nan\?'.*declared float32") as info:
        write_tfrecords(csv, tmp_path / "c2", features={"x1": {"dtype": "float32"}})
    assert info.value.feature == "x1"
    npz = tmp_path / "d.npz"
    np.savez(npz, pixels=np.ones((6, 2, 2), np.float32), label=np.array([0, 1, 0, 1, 0, 1]))
    m = write_tfrecords(npz, tmp_path / "n", split=0)
    assert m["features"] == {"pixels": {"dtype": "float32", "shape": [2, 2]}} and m["label"] == "label"
    f, lab = next(iter(make_input_fn({"manifest": m["path"]}, "train")({"batch_size": 3, "seed": 0})))
    assert f["pixels"].shape == (3, 2, 2) and lab.shape == (3,)
    with pytest.raises(DataError, match="'bird', which is not in the vocabulary"):
        write_tfrecords({"x": np.zeros(2)}, tmp_path / "v", labels=["cat", "bird"], vocabulary=["cat", "dog"])


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    data_cmd.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(list(argv))
    return args.func(args)


def test_cli_write_inspect_bench(tmp_path, capsys):
    make_folder(tmp_path / "img", per_class=3)
    assert cli("data", "write", str(tmp_path / "img"), str(tmp_path / "out"), "--shards", "2",
               "--split", "0.34", "--json") == 0
    manifest = json.loads(capsys.readouterr().out)
    assert manifest["splits"]["eval"]["count"] == 3
    grid = tmp_path / "grid.png"
    assert cli("data", "inspect", str(tmp_path / "out" / "train-*.tfrecord"), "-n", "4", "--grid", str(grid)) == 0
    out = capsys.readouterr().out
    assert "format: flowers" in out and "records: 6 in 2 file(s)" in out and "classes: cat=2, dog=2, emu=2" in out
    assert Image.open(grid).size[0] > 0
    assert cli("data", "inspect", str(tmp_path / "nothing-*.tfrecord")) == 2
    assert "No files match the pattern" in capsys.readouterr().err
    assert cli("data", "bench", str(tmp_path / "out"), "--seconds", "0.2", "--batch-size", "4", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["pipeline"]["records_per_s"] > 0 and report["ratio"] > 0 and report["advice"]
