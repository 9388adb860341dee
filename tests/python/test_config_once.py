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


def test_a_run_config_from_a_loaded_config_is_not_checked_again_one_made_by_hand_is_by_the_schema(parity, counted):
    from tpuestimator.config import load_config
    from tpuestimator.core.run_config import RunConfig
    from tpuestimator.errors import ConfigError

    cfg = load_config(parity)
    counted.clear()
    run_config = RunConfig.from_job(cfg, model_dir="m")
    assert counted["validate"] == 0 and (run_config.train_batch_size, run_config.iterations_per_loop) == (16, 10)
    with pytest.raises(ConfigError, match=r"train\.batch_size.*>= 1"):
        RunConfig(model_dir="m", train_batch_size=0)
    with pytest.raises(ConfigError, match=r"run\.precision.*mixed_bfloat16"):
        RunConfig(model_dir="m", precision="float16")
    with pytest.raises(ConfigError, match=r"run\.ps_partition\.max_shards"):
        RunConfig(model_dir="m", ps_partition={"max_shards": 0})
    assert RunConfig(model_dir="m", save_checkpoints_steps=None).save_checkpoints_steps is None  # None: not set
    assert RunConfig(model_dir="m", ps_partition={"max_shards": 2}).ps_partition.max_shards == 2


def test_a_table_job_with_flags_validates_once_and_resolves_its_data_once(counted, tmp_path):
    """The flags are mapped on the table's config without a validation of their own
    (`config.flag_settings`); the job's one load validates them with the rest."""
    import numpy as np
    import pandas as pd

    from tpuestimator.tables import train_table

    x = np.linspace(-1.0, 1.0, 40)
    result = train_table(pd.DataFrame({"x": x, "y": 2.0 * x + 1.0}), label="y", task="regression",
                         out_dir=tmp_path / "table", model="linear", early_stopping=False,
                         flags={"learning_rate": 0.02, "max_steps": 6}, runs_dir=str(tmp_path / "runs"))
    assert dict(counted) == {"validate": 1, "resolve": 1}
    assert result.global_step == 6 and result.config["params"]["learning_rate"] == 0.02


def test_one_loaded_config_run_twice_resolves_its_data_once_per_job(parity, counted, tmp_path):
    """A `JobConfig` is not validated again by `run_job`, and each job resolves its data section
    itself: a second job of the same config never reads the first job's resolution (a manifest
    rewritten between them)."""
    from tpuestimator.config import load_config
    from tpuestimator.jobs.job import run_job

    cfg = load_config(parity, ["train.max_steps=10", "eval.every_n_steps=10"])
    for name in ("m1", "m2"):
        assert run_job(cfg, model_dir=str(tmp_path / name), runs_dir=str(tmp_path / "runs")).global_step == 10
    assert dict(counted) == {"validate": 1, "resolve": 2}


def test_a_job_builds_its_evaluation_input_once_for_all_its_evaluations(parity, monkeypatch, tmp_path):
    """The built-in pipeline's evaluation input is built (its decoding traced) once per job, not
    at each of its evaluations (each rebuild cost about 0.07 CPU s: 2.4 of the 11.2 s of a
    small table's training, which evaluates every epoch)."""
    from tpuestimator.data import pipeline
    from tpuestimator.jobs.job import run_job

    built: collections.Counter = collections.Counter()
    build_dataset = pipeline.build_dataset

    def counted_build(spec, mode, *args, **kwargs):
        built[mode] += 1
        return build_dataset(spec, mode, *args, **kwargs)

    monkeypatch.setattr(pipeline, "build_dataset", counted_build)
    result = run_job(str(parity), overrides=["train.max_steps=8", "eval.every_n_steps=2", "train.iterations_per_loop=2",
                                            "export.enabled=false"],
                     model_dir=str(tmp_path / "m"), runs_dir=str(tmp_path / "runs"))
    assert result.global_step == 8 and len(result.history) == 4
    assert built["eval"] == 1, dict(built)
