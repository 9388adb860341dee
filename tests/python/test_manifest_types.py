"""`Manifest`: a manifest.json read once into a frozen record (`tpuestimator.manifest.read_manifest_file`)."""
from __future__ import annotations

import dataclasses
import json

import pytest

from tpuestimator.data.spec import resolve_section
from tpuestimator.errors import DataError
from tpuestimator.manifest import Manifest, read_manifest_file

WRITTEN = {"version": 1, "format": "features", "label": "y", "label_offset": 0,
           "features": {"x": {"dtype": "float32", "shape": [2]}, "y": {"dtype": "int64", "shape": []}},
           "vocabulary": ["no", "yes"], "num_classes": 2,
           "splits": {"train": {"pattern": "train-*.tfrecord", "files": ["train-0.tfrecord"], "count": 8,
                                "class_counts": {"no": 4, "yes": 4}}},
           "created_by": "tpuestimator.data.writers", "a_later_field": 1}


@pytest.mark.quick("manifest")
def test_a_manifest_is_read_into_typed_fields(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(WRITTEN))
    manifest = read_manifest_file(str(path))
    assert (manifest.format, manifest.label, manifest.label_offset, manifest.num_classes) == ("features", "y", 0, 2)
    assert manifest.vocabulary == ("no", "yes") and manifest.task is None and manifest.image is None
    assert manifest.split("train")["count"] == 8 and manifest.split("eval") == {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        manifest.format = "mnist"
    with pytest.raises(TypeError):
        manifest.splits["eval"] = {}  # read-only: a job's resolutions share the record
    spec = resolve_section({"manifest": str(path)})
    assert spec.format == "features" and spec.label == "y" and spec.vocabulary == ["no", "yes"]
    assert spec.train == str(tmp_path / "train-*.tfrecord") and spec.eval is None


def test_a_file_that_is_no_manifest_is_one_error_naming_it(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"splits": {}}))
    with pytest.raises(DataError, match="has no `format` field") as err:
        read_manifest_file(str(path))
    assert str(path) in str(err.value)
    with pytest.raises(DataError, match="not a tpuestimator"):
        Manifest.from_dict(["format"], path="m.json")
