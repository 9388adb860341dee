"""The config's nested objects (`debug.dump`, `debug.watch`, `eval.early_stopping`,
`run.ps_partition`) are typed views, parsed once when the config is loaded; `make_strategy`
and the Estimator read a `RunConfig` whose `ps_partition` is one."""
from __future__ import annotations

import dataclasses

import pytest

from tpuestimator.config import load_config
from tpuestimator.config_views import DumpSpec, EarlyStopping, PsPartition, WatchSpec, parse_view
from tpuestimator.errors import ConfigError

BASE = {"model": "linear", "data": {"format": "mnist", "train": "/data/train-*", "eval": "/data/eval-*",
                                    "image": {"height": 28, "width": 28, "channels": 1}}}


@pytest.mark.quick("config_views")
def test_nested_objects_are_typed_views_with_their_defaults():
    cfg = load_config({**BASE, "debug": {"dump": {"dir": "d", "steps": [2, 3]}, "watch": {"outputs": ["logits"]}},
                       "eval": {"early_stopping": {"metric": "loss", "patience": 1}},
                       "run": {"ps_partition": {"max_shards": 2}}})
    assert cfg.debug.dump == DumpSpec(dir="d", steps=[2, 3], mode="FULL_HEALTH")
    assert cfg.debug.watch == WatchSpec(outputs=["logits"], summarize=3, every_n_loops=1)
    assert cfg.eval.early_stopping == EarlyStopping(metric="loss", patience=1, mode="min")
    assert cfg.run.ps_partition == PsPartition(max_shards=2)
    assert cfg.debug is cfg.debug  # parsed once, when the config was made
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.debug.dump.dir = "elsewhere"
    plain = load_config(BASE)
    assert plain.debug.dump is None and plain.eval.early_stopping is None and plain.run.ps_partition is None
    assert cfg.to_dict()["debug"]["dump"] == {"dir": "d", "steps": [2, 3]}  # the file keeps what was written
    import pickle

    assert pickle.loads(pickle.dumps(cfg)).debug.dump == cfg.debug.dump  # a JobConfig still pickles


def test_a_view_names_the_field_of_a_bad_key():
    with pytest.raises(ConfigError) as err:
        parse_view(WatchSpec, {"outputs": ["a"], "firstn": 2}, "debug.watch")
    assert err.value.field == "debug.watch.firstn"
    with pytest.raises(ConfigError, match="debug.dump.dir"):
        parse_view(DumpSpec, {"steps": [1, 2]}, "debug.dump")
    with pytest.raises(ConfigError, match="eval.early_stopping"):
        parse_view(EarlyStopping, {"metric": "loss", "mode": "up"}, "eval.early_stopping")


def test_run_config_parses_a_ps_partition_dict_once():
    from tpuestimator.core.run_config import RunConfig

    config = RunConfig(model_dir="m", ps_partition={"min_shard_bytes": 1024})
    assert config.ps_partition == PsPartition(min_shard_bytes=1024)
    with pytest.raises(ConfigError, match="run.ps_partition.shards"):
        RunConfig(model_dir="m", ps_partition={"shards": 2})
    cfg = load_config({**BASE, "run": {"ps_partition": {"max_shards": 3}}})
    assert RunConfig.from_job(cfg).ps_partition == PsPartition(max_shards=3)


def test_make_strategy_reads_a_run_config():
    from tpuestimator.core.devices import make_strategy
    from tpuestimator.core.run_config import RunConfig

    strategy, info = make_strategy(RunConfig(model_dir="m", strategy="cpu"))
    assert info.strategy_name == "cpu" and info.num_replicas == 1
    assert make_strategy(RunConfig(model_dir="other", strategy="cpu"))[0] is strategy  # reused per device set
