"""config_flags.py: a run's flags (tfruns's flags(), R's tpu_train(flags=)) as config overrides."""
from __future__ import annotations

import pytest

from tpuestimator.config import load_config
from tpuestimator.config_flags import flag_field, flag_overrides
from tpuestimator.errors import ConfigError


def _cfg(fixtures_dir):
    return load_config(str(fixtures_dir / "parity" / "parity.yaml"))


@pytest.mark.quick("config_flags")
def test_dotted_and_short_names_map_to_fields(fixtures_dir):
    cfg = _cfg(fixtures_dir)
    assert flag_field(cfg, "params.learning_rate") == "params.learning_rate"
    assert flag_field(cfg, "params.new_param") == "params.new_param"  # params are free-form
    assert flag_field(cfg, "learning_rate") == "params.learning_rate"  # params first
    assert flag_field(cfg, "max_steps") == "train.max_steps"
    assert flag_field(cfg, "batch_size") == "train.batch_size"  # train before eval
    assert flag_field(cfg, "model") == "model"
    assert flag_field(cfg, "train.max_step") is None and flag_field(cfg, "nonsense") is None
    assert flag_field(cfg, "train") is None  # a section is not a field


def test_overrides_apply_and_unknown_flags_name_the_fields(fixtures_dir):
    cfg = _cfg(fixtures_dir)
    sets = flag_overrides(cfg, {"learning_rate": 0.5, "max_steps": 20, "model": "mlp", "run.seed": 3})
    assert sets == ["params.learning_rate=0.5", "train.max_steps=20", "model=mlp", "run.seed=3"]
    applied = load_config(str(fixtures_dir / "parity" / "parity.yaml"), sets)
    assert applied.params["learning_rate"] == 0.5 and applied.train.max_steps == 20 and applied.model == "mlp"
    with pytest.raises(ConfigError) as err:
        flag_overrides(cfg, {"learning_rat": 0.5, "max_steps": 20, "batch_siz": 8})
    message = str(err.value)
    assert "learning_rat=0.5" in message and "batch_siz=8" in message and "max_steps=20" not in message
    assert "params.learning_rate" in message and "train.max_steps" in message and "learning_rate" in message
    # a misspelt dotted field: the schema's own error, with its suggestion
    with pytest.raises(ConfigError, match="did you mean `max_steps`"):
        flag_overrides(cfg, {"train.max_step": 1})
