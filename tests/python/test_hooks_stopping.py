"""EarlyStoppingHook on a plateau, its shared comparison with eval.early_stopping, and stop flags."""
from __future__ import annotations

import pytest

from helpers import array_input_fn, make_data


def _estimator(tmp_path, learning_rate: float):
    from tpuestimator import Estimator, RunConfig

    return Estimator("linear", RunConfig(model_dir=str(tmp_path / "model"), train_batch_size=32, eval_batch_size=64,
                                         iterations_per_loop=2, save_checkpoints_steps=None, strategy="cpu"),
                     {"num_classes": 3, "learning_rate": learning_rate, "optimizer": "sgd"})


def test_early_stopping_hook_stops_at_the_third_eval_after_the_first_on_a_plateau(tmp_path):
    from tpuestimator.core.stopping import EarlyStoppingHook
    from tpuestimator.core.training import EvalSpec, TrainSpec, train_and_evaluate

    x, y = make_data(256)
    est = _estimator(tmp_path, learning_rate=0.0)  # the loss never changes: a plateau from the first eval
    hook = EarlyStoppingHook(monitor="loss", patience=2)
    loops = []
    result = train_and_evaluate(
        est, TrainSpec(input_fn=array_input_fn(x, y), max_steps=40,
                       hooks=[hook, lambda e, i: loops.append(i["step"]) if e == "after_loop" else None]),
        EvalSpec(input_fn=array_input_fn(x, y), every_n_steps=2))
    # Eval 1 (step 2) sets the best; evals 2, 3 (steps 4, 6) are within patience; eval 4 (step 8) stops.
    assert [h["global_step"] for h in result.history] == [2, 4, 6, 8]
    assert hook.stopped_step == 8 and hook.best_step == 2 and hook.bad_evals == 3
    assert result.global_step == 8 and est.global_step == 8
    assert loops == [2, 4, 6, 8]  # no loop ran after the hook asked to stop


def test_early_stopping_hook_resets_patience_on_improvement(tmp_path):
    from tpuestimator.core.stopping import EarlyStoppingHook

    hook = EarlyStoppingHook(monitor="accuracy", mode="auto", patience=1, min_delta=0.01)
    assert hook.mode == "max"
    hook.after_eval(1, {"accuracy": 0.50})
    hook.after_eval(2, {"accuracy": 0.505})
    assert (hook.best, hook.bad_evals) == (0.50, 1)  # 0.505 < 0.50 + min_delta: no improvement
    for step, acc in [(3, 0.60), (4, 0.60)]:
        hook.after_eval(step, {"accuracy": acc})
    assert not hook.stop_training and hook.best == 0.60 and hook.bad_evals == 1
    hook.after_eval(5, {"accuracy": float("nan")})  # NaN never improves
    assert hook.stop_training and hook.stopped_step == 5
    with pytest.raises(KeyError, match="accuracy"):
        EarlyStoppingHook(monitor="accuracy").after_eval(1, {"loss": 1.0})
    with pytest.raises(ValueError):
        EarlyStoppingHook(patience=-1)


def test_hook_and_config_early_stopping_share_one_comparison():
    from tpuestimator.core.stopping import EarlyStoppingHook

    values = [1.0, 0.95, 0.949, 0.90, 0.90, 0.899, 0.95]
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        persisted = EarlyStoppingHook(monitor="loss", mode="min", patience=1, min_delta=0.01,
                                      state_path=f"{tmp}/early_stopping.json")
        hook = EarlyStoppingHook(monitor="loss", mode="min", patience=1, min_delta=0.01)
        for step, value in enumerate(values, 1):
            stop_config = persisted.update(step, {"loss": value})
            hook.after_eval(step, {"loss": value})
            assert hook.stop_training == stop_config
            assert (hook.best, hook.bad_evals) == (persisted.best, persisted.bad_evals)
            if stop_config:
                break
    assert hook.stopped_step == 6


def test_stop_at_step_hook_and_a_stop_flag_set_before_train(tmp_path):
    from tpuestimator.hooks.builtin import StopAtStepHook

    x, y = make_data(256)
    est = _estimator(tmp_path, learning_rate=0.1)
    hook = StopAtStepHook(4)
    est.train(array_input_fn(x, y), max_steps=20, hooks=[hook])
    assert est.global_step == 4 and est.stop_training
    est.train(array_input_fn(x, y), max_steps=20, hooks=[hook])  # still asking to stop: trains nothing
    assert est.global_step == 4 and est.stop_training
