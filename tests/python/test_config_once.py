"""One job validates its config once and resolves its data section once, from the CLI and the
Python API (R's `tpu_train(path, flags =)`: tests/testthat/test-tfruns-real.R). Counted by
wrapping the project's own `config.validate` and `data.spec._resolve` (no TensorFlow patched)."""
from __future__ import annotations

import collections
import shutil

import pytest


@pytest.fixture
def counted(monkeypatch):
    from tpuestimator import config
    from tpuestimator.data import spec

    counts: collections.Counter = collections.Counter()
    validate, resolve = config.validate, spec._resolve

    def counted_validate(*args, **kwargs):
        counts["validate"] += 1
        return validate(*args, **kwargs)

    def counted_resolve(section):
        counts["resolve"] += 1
        return resolve(section)

    monkeypatch.setattr(config, "validate", counted_validate)
    monkeypatch.setattr(spec, "_resolve", counted_resolve)
    return counts


@pytest.fixture
def parity(tmp_path, fixtures_dir):
    folder = tmp_path / "parity"
    shutil.copytree(fixtures_dir / "parity", folder)
    return folder / "parity.yaml"


def test_load_config_maps_flags_before_its_one_validation(parity, counted):
    from tpuestimator.config import load_config
    from tpuestimator.errors import ConfigError

    cfg = load_config(parity, ["run.seed=2"], flags={"max_steps": 5, "learning_rate": 0.5, "eval.batch_size": 8})
    assert counted["validate"] == 1
    assert (cfg.train.max_steps, cfg.params["learning_rate"], cfg.eval.batch_size, cfg.run.seed) == (5, 0.5, 8, 2)
    assert cfg.overrides == ("run.seed=2", "train.max_steps=5", "params.learning_rate=0.5", "eval.batch_size=8")
    with pytest.raises(ConfigError, match="learning_rat"):
        load_config(parity, flags={"learning_rat": 0.1})
    with pytest.raises(ConfigError, match="train.max_steps"):
        load_config(parity, flags={"max_steps": -1})  # a flag's value is validated with the rest


def test_a_python_job_validates_once_and_resolves_its_data_once(parity, counted, tmp_path):
    from tpuestimator.jobs.job import run_job

    result = run_job(str(parity), overrides=["train.max_steps=10", "eval.every_n_steps=10"],
                     model_dir=str(tmp_path / "m"), runs_dir=str(tmp_path / "runs"))
    assert result.global_step == 10 and result.metrics
    assert dict(counted) == {"validate": 1, "resolve": 1}


def test_a_cli_job_validates_once_and_resolves_its_data_once(parity, counted, tmp_path, capsys):
    from tpuestimator.cli import main

    code = main(["train", str(parity), "--set", "train.max_steps=10", "--set", "eval.every_n_steps=10",
                 "--model-dir", str(tmp_path / "m"), "--runs-dir", str(tmp_path / "runs")])
    assert code == 0 and "trained to global step 10" in capsys.readouterr().out
    assert dict(counted) == {"validate": 1, "resolve": 1}
