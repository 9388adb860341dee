"""Config loading, overrides and validation; the bad cases come from tests/fixtures/bad_configs.yaml."""
from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import yaml

from conftest import FIXTURES
from tpuestimator.config import load_config
from tpuestimator.errors import ConfigError

BAD = yaml.safe_load((FIXTURES / "bad_configs.yaml").read_text())


def _drop(raw: dict, dotted: str) -> None:
    *parents, last = dotted.split(".")
    for p in parents:
        raw = raw[p]
    del raw[last]


@pytest.mark.quick("config", "errors")
@pytest.mark.parametrize("case", BAD["cases"], ids=[c["name"] for c in BAD["cases"]])
def test_bad_config_names_field_value_and_fix(case):
    raw = copy.deepcopy(BAD["base"])
    for dotted in case.get("drop", []):
        _drop(raw, dotted)
    with pytest.raises(ConfigError) as info:
        load_config(raw, case.get("set", []))
    assert info.value.field == case["field"]
    for text in case["message"]:
        assert text in str(info.value)


@pytest.mark.quick("config_rules", "config_sections")
def test_the_rules_across_fields_and_the_section_views_of_a_filled_config():
    from tpuestimator.config_rules import check_semantics
    from tpuestimator.config_sections import section_as_written, section_view

    cfg = load_config(BAD["base"], ["train.max_steps=10"])
    raw = cfg.to_dict()
    check_semantics(raw, None)  # the loaded config passes its own rules
    raw["train"]["steps"] = 5  # and max_steps: both
    with pytest.raises(ConfigError) as info:
        check_semantics(raw, "job.yaml")
    assert info.value.field == "train.steps"
    assert section_view(cfg.raw, "train") == cfg.train and cfg.train.max_steps == 10
    assert section_as_written(cfg.data) == cfg.to_dict()["data"]  # what an export's metadata holds


def test_at_least_ten_bad_cases():
    assert len(BAD["cases"]) >= 10


def test_overrides_parse_yaml_scalars_and_fill_defaults(tmp_path):
    cfg = load_config(BAD["base"], ["train.batch_size=32", "params.learning_rate=1e-3", "run.jit_compile=true",
                                    "export.exporters=[final, latest]"])
    assert cfg.raw["train"]["batch_size"] == 32
    assert cfg.raw["params"]["learning_rate"] == 0.001
    assert cfg.raw["run"]["jit_compile"] is True
    assert cfg.raw["export"]["exporters"] == ["final", "latest"]
    assert cfg.raw["eval"]["steps"] is None           # default filled in
    assert cfg.raw["debug"]["nan_sentinel"] is True


def test_data_paths_resolve_against_the_config_file(tmp_path):
    path = tmp_path / "sub" / "job.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(BAD["base"]))
    cfg = load_config(path)
    assert cfg.raw["data"]["train"] == str(path.parent / "train.tfrecord")
    assert cfg.name == "job"
    assert cfg.model_dir == "models/job"


def test_unreadable_files_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="existing YAML or JSON file"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match="valid YAML"):
        load_config(bad)


def test_cli_reports_bad_config_before_tensorflow_starts(tmp_path, python_env):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(BAD["base"]))
    code = ("import sys; from tpuestimator.cli import main; rc = main(sys.argv[1:]); "
            "assert 'tensorflow' not in sys.modules, 'TensorFlow was imported'; sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, "train", str(path), "--set", "train.batch_size=0"],
                          env=python_env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "train.batch_size" in proc.stderr and ">= 1" in proc.stderr


@pytest.mark.quick("cli")
def test_cli_help_does_not_import_tensorflow(python_env):
    code = ("import sys; from tpuestimator.cli import build_parser; build_parser().format_help(); "
            "print('tensorflow' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], env=python_env, capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "False", proc.stderr


def test_filled_config_round_trips():
    cfg = load_config(BAD["base"])
    again = load_config(cfg.to_dict())
    assert again.to_dict() == cfg.to_dict()
    assert cfg.replace(train={"max_steps": 7}).raw["train"]["max_steps"] == 7


def test_replace_checks_what_changed_and_the_rules_across_sections():
    """`replace` is a real change: the changed section is checked against the schema and the
    rules across sections run again; the config is not reloaded (its source stays)."""
    cfg = load_config(BAD["base"])
    with pytest.raises(ConfigError, match="train.batch_size"):
        cfg.replace(train={"batch_size": "many"})
    with pytest.raises(ConfigError, match="train.save_checkpoints_steps"):
        cfg.replace(train={"iterations_per_loop": 7, "save_checkpoints_steps": 10})
    with pytest.raises(ConfigError, match="nosuch"):
        cfg.replace(nosuch={"a": 1})
    assert cfg.replace(run={"strategy": "cpu"}).source == cfg.source
