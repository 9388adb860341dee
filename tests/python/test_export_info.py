"""`ExportInfo`: the one typed reader of an export's `assets.extra/tpuestimator.json`."""
from __future__ import annotations

import json

import pytest

from tpuestimator.errors import ConfigError
from tpuestimator.serving.export_info import ExportInfo, TableInfo, read_export_info, write_export_info

# The file as a table model's export writes it (keys and JSON types of the format).
WRITTEN = {
    "data": {"manifest": "/data/iris/manifest.json", "shuffle_buffer": 1000, "image": None},
    "class_names": ["setosa", "versicolor", "virginica"],
    "feature_spec": {"petal_length": [[], "float32"], "image": [[8, 8, 1], "float32"]},
    "model": "linear",
    "global_step": 40,
    "table": {"feature_columns": {"petal_length": {"type": "numeric", "mean": 3.7, "variance": 3.1}},
              "task": "classification", "label": "species"},
}


def test_the_file_is_read_into_typed_fields_and_written_back_unchanged(tmp_path):
    (tmp_path / "assets.extra").mkdir()
    (tmp_path / "assets.extra" / "tpuestimator.json").write_text(json.dumps(WRITTEN))
    info = read_export_info(tmp_path)
    assert info.class_names == ("setosa", "versicolor", "virginica")
    assert info.feature_spec == {"petal_length": ((), "float32"), "image": ((8, 8, 1), "float32")}
    assert (info.model, info.global_step, info.task) == ("linear", 40, "classification")
    assert info.table.label == "species" and info.table.feature_columns["petal_length"]["mean"] == 3.7
    assert info.data["manifest"] == "/data/iris/manifest.json"
    assert info.to_dict() == WRITTEN

    report = {"file": "model.tflite", "passed": True, "max_abs_difference": 0.0}
    write_export_info(tmp_path, info.with_tflite(report))
    again = json.loads((tmp_path / "assets.extra" / "tpuestimator.json").read_text())
    assert again == {**WRITTEN, "tflite": {"model.tflite": report}}
    assert read_export_info(tmp_path).tflite == {"model.tflite": report}


def test_an_export_without_metadata_or_a_table_reads_as_such(tmp_path):
    assert read_export_info(tmp_path) is None
    info = ExportInfo.from_dict({"data": {"format": "mnist"}, "class_names": [], "feature_spec": {},
                                 "model": "cnn", "global_step": None})
    assert info.table is None and info.task is None and info.global_step is None
    assert "table" not in info.to_dict() and "tflite" not in info.to_dict()
    assert ExportInfo(table=TableInfo(feature_columns={}, task="regression")).task == "regression"


def test_a_malformed_file_is_one_error_naming_it(tmp_path):
    meta = tmp_path / "assets.extra" / "tpuestimator.json"
    meta.parent.mkdir()
    meta.write_text("{not json")
    with pytest.raises(ConfigError, match="tpuestimator.json") as err:
        read_export_info(tmp_path)
    assert "export again" in str(err.value)
    meta.write_text(json.dumps({"feature_spec": {"x": 3}}))
    with pytest.raises(ConfigError, match="tpuestimator.json"):
        read_export_info(tmp_path)
    with pytest.raises(dataclasses_frozen()):
        ExportInfo().model = "x"


def dataclasses_frozen():
    import dataclasses

    return dataclasses.FrozenInstanceError
