"""Issue 13.7: a training stopped at step k and resumed to N ends exactly where an uninterrupted
training to N ends: same batches (the input is positioned, not reseeded), same augmentation,
same dropout masks, so the same weights and the same final evaluation (bit for bit on CPU).

Same weights alone would also come from a silent retrain from step 0 (it sees the same batches
in the same order), so each test also checks that the resumed training began at the step of
the checkpoint on disk and ran only the remaining steps (`StepLog`)."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import array_input_fn, finite_input_fn, make_data
from tpuestimator.jobs.modeldir import checkpoint_step


class StepLog:
    """A hook (`fn(event, info)`) that records what a training did: the global step each
    `train` call began at and the step at the end of each device loop."""

    def __init__(self):
        self.begins: list[int] = []
        self.loop_ends: list[int] = []

    def __call__(self, event, info):
        if event == "begin":
            self.begins.append(int(info["step"]))
        elif event == "after_loop":
            self.loop_ends.append(int(info["step"]))

    def assert_resumed(self, start: int, end: int, loop: int) -> None:
        """Began at `start` (not 0), ran loops of at most `loop` steps up to `end`, nothing before `start`."""
        assert self.begins and self.begins[0] == start, f"began at {self.begins}, expected the checkpoint's {start}"
        assert self.loop_ends and self.loop_ends[-1] == end, self.loop_ends
        steps = [b - a for a, b in zip([start, *self.loop_ends], self.loop_ends)]
        assert all(0 < n <= loop for n in steps), f"loop ends {self.loop_ends} from {start}"
        assert sum(steps) == end - start


def _weights(model_dir):
    import tensorflow as tf

    path = tf.train.latest_checkpoint(str(model_dir))
    return {name: tf.train.load_variable(path, name) for name, _ in tf.train.list_variables(path)
            if name.startswith(("model/", "optimizer/", "random_state/"))}


def _assert_same_weights(a, b):
    assert a.keys() == b.keys() and a
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_estimator_resume_with_a_shuffled_user_input_is_exact(tmp_path):
    """A user's input function (no skip of its own): the Estimator skips the batches already trained on."""
    from tpuestimator import Estimator, RunConfig

    x, y = make_data(300)
    fn = array_input_fn(x, y, shuffle=True)

    def estimator(name):
        cfg = RunConfig(model_dir=str(tmp_path / name), train_batch_size=32, eval_batch_size=64,
                        iterations_per_loop=10, save_checkpoints_steps=100, strategy="cpu", seed=5)
        return Estimator("linear", cfg, {"num_classes": 3, "learning_rate": 0.05})

    whole = estimator("whole")
    whole.train(fn, max_steps=40)
    estimator("split").train(fn, max_steps=13)  # stops mid-loop and mid-epoch
    assert checkpoint_step(tmp_path / "split") == 13
    resumed = estimator("split")  # a new process would look the same
    log = StepLog()
    resumed.train(fn, max_steps=40, hooks=[log])
    log.assert_resumed(13, 40, loop=10)
    _assert_same_weights(_weights(tmp_path / "whole"), _weights(tmp_path / "split"))
    assert resumed.evaluate(fn) == whole.evaluate(fn)


def test_a_finite_input_is_resumed_within_its_pass(tmp_path):
    """One pass per `train` call (no repeat): a call stopped mid-pass and resumed reads the rest
    of the pass (same weights as one call), and the next call reads a whole pass again."""
    from tpuestimator import Estimator, RunConfig

    x, y = make_data(300)  # 9 batches of 32

    def estimator(name):
        cfg = RunConfig(model_dir=str(tmp_path / name), train_batch_size=32, eval_batch_size=64,
                        iterations_per_loop=4, save_checkpoints_steps=100, strategy="cpu", seed=5)
        return Estimator("linear", cfg, {"num_classes": 3, "learning_rate": 0.05})

    estimator("whole").train(finite_input_fn(x, y))
    estimator("split").train(finite_input_fn(x, y), max_steps=5)
    assert checkpoint_step(tmp_path / "split") == 5
    resumed = estimator("split")
    log = StepLog()
    resumed.train(finite_input_fn(x, y), hooks=[log])
    assert resumed.global_step == 9
    log.assert_resumed(5, 9, loop=4)
    _assert_same_weights(_weights(tmp_path / "whole"), _weights(tmp_path / "split"))
    again = estimator("split")
    again.train(finite_input_fn(x, y))  # the next pass: all 9 batches
    assert again.global_step == 18


def _job(config, model_dir, overrides, **kw):
    from tpuestimator.jobs.job import run_job

    return run_job(config, overrides=overrides, model_dir=str(model_dir), record=False, export=False, **kw)


def test_job_resume_is_exact_on_the_builtin_pipeline(tmp_path, fixtures_dir):
    """The digits/linear case of the issue (stop at 700 of 1500: eval loss 0.0548 vs 0.0366), on the parity job."""
    config = str(fixtures_dir / "parity" / "parity.yaml")
    common = ["train.max_steps=40", "eval.every_n_steps=20"]
    whole = _job(config, tmp_path / "whole", common)
    _job(config, tmp_path / "split", [*common, "train.max_steps=17"])  # mid-loop, before the first evaluation
    assert checkpoint_step(tmp_path / "split") == 17
    log = StepLog()
    resumed = _job(config, tmp_path / "split", common, hooks=[log])
    log.assert_resumed(17, 40, loop=10)
    assert resumed.global_step == whole.global_step == 40
    assert resumed.metrics == whole.metrics
    _assert_same_weights(_weights(tmp_path / "whole"), _weights(tmp_path / "split"))


@pytest.mark.slow
def test_resume_is_exact_with_8_replicas(tmp_path, fixtures_dir):
    """MirroredStrategy over the tests' 8 logical CPUs: each step takes 8 per-replica batches from
    the built-in pipeline, so a resumed input skips 8 per step already trained."""
    from tpuestimator import Estimator, RunConfig
    from tpuestimator.config import load_config
    from tpuestimator.jobs.from_config import input_fn_for

    cfg = load_config(str(fixtures_dir / "parity" / "parity.yaml"))
    fn = input_fn_for(cfg, "train")

    def estimator(name):
        run = RunConfig(model_dir=str(tmp_path / name), train_batch_size=16, eval_batch_size=16,
                        iterations_per_loop=10, save_checkpoints_steps=100, strategy="mirrored", seed=1)
        return Estimator("linear", run, {"num_classes": 3, "learning_rate": 0.1})

    estimator("whole").train(fn, max_steps=20)
    estimator("split").train(fn, max_steps=7)
    assert checkpoint_step(tmp_path / "split") == 7
    resumed = estimator("split")
    log = StepLog()
    resumed.train(fn, max_steps=20, hooks=[log])
    log.assert_resumed(7, 20, loop=10)
    assert resumed.num_replicas == 8 and resumed.global_step == 20
    _assert_same_weights(_weights(tmp_path / "whole"), _weights(tmp_path / "split"))


@pytest.mark.slow
def test_job_resume_is_exact_with_dropout_and_augmentation(tmp_path):
    """The digits CNN (dropout 0.4) with random flips, brightness and contrast: the dropout
    masks' random state is in the checkpoint and the augmentation is keyed by the batch's position."""
    from tpuestimator.examples import write_example

    config = write_example("digits", str(tmp_path / "digits"))
    common = ["train.max_steps=30", "train.iterations_per_loop=10", "train.save_checkpoints_steps=10",
              "eval.every_n_steps=30", "train.batch_size=16", "params.filters=[4, 8]", "params.dense_units=16",
              "data.augment.flip_left_right=true", "data.augment.brightness=0.2", "data.augment.contrast=[0.8, 1.2]"]
    whole = _job(config, tmp_path / "whole", common)
    _job(config, tmp_path / "split", [*common, "train.max_steps=10"])
    assert checkpoint_step(tmp_path / "split") == 10
    log = StepLog()
    resumed = _job(config, tmp_path / "split", common, hooks=[log])
    log.assert_resumed(10, 30, loop=10)
    assert resumed.metrics == whole.metrics
    weights = _weights(tmp_path / "whole")
    assert any(name.startswith("random_state/") for name in weights)  # the dropout's seed generator
    _assert_same_weights(weights, _weights(tmp_path / "split"))


def test_a_checkpoint_without_random_state_still_resumes(tmp_path):
    """Checkpoints written before the dropout layers' random state was checkpointed still resume
    (their dropout masks restart; logged), instead of failing as a checkpoint of another model."""
    import tensorflow as tf

    from tpuestimator import Estimator, RunConfig

    x, y = make_data(200)
    fn = array_input_fn(x, y)

    def estimator(name):
        cfg = RunConfig(model_dir=str(tmp_path / name), train_batch_size=32, eval_batch_size=64,
                        iterations_per_loop=2, save_checkpoints_steps=100, strategy="cpu", seed=5)
        return Estimator("mlp", cfg, {"num_classes": 3, "hidden_units": [8], "dropout": 0.3})

    first = estimator("new")
    first.train(fn, max_steps=4)
    state = first.state
    assert len(state.checkpoint.random_state) == 1  # the Dropout layer's seed generator
    older = tf.train.Checkpoint(model=state.model, optimizer=state.optimizer, step=state.global_step)
    tf.train.CheckpointManager(older, str(tmp_path / "old"), max_to_keep=1).save(checkpoint_number=4)
    resumed = estimator("old")
    log = StepLog()
    resumed.train(fn, max_steps=8, hooks=[log])
    assert resumed.global_step == 8
    log.assert_resumed(4, 8, loop=2)
