"""Issue 13.2: settings changed on a resumed run (--resume) take effect or are refused, never
recorded but silently not applied."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest


def _learning_rate(model_dir) -> float:
    import tensorflow as tf

    path = tf.train.latest_checkpoint(str(model_dir))
    return float(tf.train.load_variable(path, "optimizer/_learning_rate/.ATTRIBUTES/VARIABLE_VALUE"))


def test_a_changed_learning_rate_wins_over_the_checkpoint(tmp_path, fixtures_dir, caplog):
    """docs/getting-started-python.md's `--set params.learning_rate=1e-3` on a resumed run: Adam's learning rate used to
    come back from the checkpoint (0.1) while the run recorded the new value."""
    from tpuestimator.jobs.job import run_job
    from tpuestimator.runs import run_info

    config = str(fixtures_dir / "parity" / "parity.yaml")
    model_dir, runs = tmp_path / "m", str(tmp_path / "runs")
    run_job(config, overrides=["train.max_steps=10"], model_dir=str(model_dir), record=False, export=False)
    assert _learning_rate(model_dir) == pytest.approx(0.1)
    with caplog.at_level(logging.WARNING, logger="tpuestimator.core.checkpointing"):
        resumed = run_job(config, overrides=["train.max_steps=20", "params.learning_rate=0.01"],
                          model_dir=str(model_dir), runs_dir=runs, export=False, resume=True)
    assert "learning_rate 0.1 -> 0.01 from the config" in caplog.text
    assert _learning_rate(model_dir) == pytest.approx(0.01)  # what trained steps 10..20, and is recorded
    assert run_info(resumed.run_dir)["flags"]["learning_rate"] == 0.01
    # the same settings again: nothing to replace, nothing logged
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tpuestimator.core.checkpointing"):
        run_job(config, overrides=["train.max_steps=30", "params.learning_rate=0.01"], model_dir=str(model_dir),
                record=False, export=False)
    assert "from the config" not in caplog.text


def test_an_architecture_change_on_resume_is_refused_by_name(tmp_path, fixtures_dir):
    """A change that cannot take effect on the checkpoint (other variables) fails before training,
    naming each changed field with both values and the fix; the model dir's config is kept."""
    from tpuestimator.jobs.job import run_job
    from tpuestimator.jobs.modeldir import ModelDirConflictError

    config = str(fixtures_dir / "parity" / "parity.yaml")
    model_dir = tmp_path / "m"
    run_job(config, overrides=["train.max_steps=10"], model_dir=str(model_dir), record=False, export=False)
    recorded = (model_dir / "config.yaml").read_text()
    for change, named in ((["model=mlp", "params.hidden_units=[4]"], "params.hidden_units: None -> [4]"),
                          (["model=mlp", "params.hidden_units=[3]"], "model: 'linear' -> 'mlp'")):  # (4,3) fits
        with pytest.raises(ModelDirConflictError) as caught:
            run_job(config, overrides=["train.max_steps=20", "params.learning_rate=0.05", *change],
                    model_dir=str(model_dir), record=False, export=False, resume=True)
        message = str(caught.value)
        assert named in message and "cannot take effect" in message and "new model dir" in message
        assert "learning_rate" not in caught.value.differences  # that one would have taken effect
        assert (model_dir / "config.yaml").read_text() == recorded
    assert sorted(p.name for p in Path(model_dir).glob("ckpt-*.index")) == ["ckpt-10.index"]  # nothing trained
    resumed = run_job(config, overrides=["train.max_steps=20"], model_dir=str(model_dir), record=False, export=False)
    assert resumed.global_step == 20
