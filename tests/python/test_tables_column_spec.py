"""A table's columns are parsed once from the manifest into typed `ColumnSpec`s: the manifest's
format is unchanged (`as_dict` gives each column back as written), and a key no column has, in
the manifest or in the config's `data.feature_columns`, is one error naming the column and key."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tpuestimator.data.spec import resolve_section
from tpuestimator.errors import ConfigError
from tpuestimator.models.column_spec import ColumnSpec, columns_as_dicts
from tpuestimator.tables import write_table

CARS = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "tables" / "cars.csv"


@pytest.fixture(scope="module")
def manifest_path(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cars") / "d"
    write_table(CARS, out, label="mpg", missing="mean",
                feature_columns={"cylinders": {"type": "categorical"},
                                 "cyl_x_origin": {"type": "crossed", "columns": ["cylinders", "origin"], "buckets": 8}})
    return out / "manifest.json"


@pytest.mark.quick("tables", "models")
def test_columns_are_typed_and_the_manifest_format_is_unchanged(manifest_path):
    written = json.loads(manifest_path.read_text())["feature_columns"]
    spec = resolve_section({"manifest": str(manifest_path)})
    assert all(isinstance(c, ColumnSpec) for c in spec.feature_columns.values())
    assert columns_as_dicts(spec.feature_columns) == written
    origin = spec.feature_columns["origin"]
    assert origin.type == "categorical" and origin.cardinality == len(written["origin"]["vocabulary"]) + 1
    assert spec.feature_columns["horsepower"].missing_default() == pytest.approx(written["horsepower"]["mean"])
    assert not spec.feature_columns["cyl_x_origin"].stored and spec.feature_columns["weight"].stored
    assert spec.as_section()["feature_columns"] == written  # a run's archived config: the manifest's dicts


def test_an_unknown_key_in_a_manifest_column_names_the_column_and_key(manifest_path, tmp_path):
    manifest = json.loads(manifest_path.read_text())
    manifest["feature_columns"]["origin"]["vocabulery"] = ["us"]
    edited = tmp_path / "manifest.json"
    edited.write_text(json.dumps(manifest))
    for shard in manifest_path.parent.glob("*.tfrecord"):
        (tmp_path / shard.name).symlink_to(shard)
    with pytest.raises(ConfigError) as err:
        resolve_section({"manifest": str(edited)})
    assert err.value.field == "feature_columns.origin.vocabulery" and err.value.source == str(edited)
    assert "did you mean `vocabulary`" in str(err.value)


def test_an_unknown_key_in_a_config_override_names_the_config_field(manifest_path):
    with pytest.raises(ConfigError) as err:
        resolve_section({"manifest": str(manifest_path), "feature_columns": {"weight": {"normalise": False}}})
    assert err.value.field == "data.feature_columns.weight.normalise" and err.value.source is None
    spec = resolve_section({"manifest": str(manifest_path), "feature_columns": {"weight": {"normalize": False}}})
    assert spec.feature_columns["weight"].normalized is False


def test_a_column_without_a_type_or_not_a_mapping_is_refused():
    with pytest.raises(ConfigError, match="feature_columns.x.type"):
        ColumnSpec.parse("x", {"dtype": "float32"})
    with pytest.raises(ConfigError, match="feature_columns.x"):
        ColumnSpec.parse("x", ["numeric"])
