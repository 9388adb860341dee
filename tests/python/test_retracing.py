"""Jobs run one after another in one process (R's `tpu_train()` in a console, a notebook)
must not log TensorFlow's "triggered tf.function retracing" warning: every job builds new
device functions over new variables, which is not retracing (`tpuestimator.core.tracing`)."""
from __future__ import annotations

import logging

import pytest

RETRACING = "triggered tf.function retracing"


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture
def tf_warnings():
    """The `tensorflow` logger's warnings while the test runs (TF logs the retracing warning there)."""
    import tensorflow as tf  # noqa: F401  (creates the logger's handlers first)

    handler = _Collect()
    logger = logging.getLogger("tensorflow")
    logger.addHandler(handler)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)


def test_jobs_in_one_process_log_no_retracing(tmp_path, fixtures_dir, tf_warnings):
    """Three small jobs: TensorFlow warns from the 5th trace of one function; before the fix
    the TensorBoard writers alone traced 4 functions per job (the 3rd job warned)."""
    from tpuestimator.jobs.job import run_job

    config = str(fixtures_dir / "parity" / "parity.yaml")
    for i in range(3):
        result = run_job(config, overrides=["eval.every_n_steps=20", "train.max_steps=40"],
                         model_dir=str(tmp_path / f"m{i}"), runs_dir=str(tmp_path / "runs"))
        assert result.global_step == 40
    retraced = [m for m in tf_warnings if RETRACING in m]
    assert not retraced, retraced


def test_many_estimators_in_one_process_log_no_retracing(tmp_path, tf_warnings):
    """Six Estimators (more than TensorFlow's threshold of five traces per function) each
    train, evaluate, predict and export: each device function is traced once per Estimator."""
    from helpers import array_input_fn, make_data
    from tpuestimator import Estimator, RunConfig
    from tpuestimator.hooks.host_call import HostCallHook

    x, y = make_data(64)
    for i in range(6):
        est = Estimator("linear", RunConfig(model_dir=str(tmp_path / f"m{i}"), train_batch_size=16,
                                            eval_batch_size=16, predict_batch_size=16, iterations_per_loop=2,
                                            strategy="cpu"), {"num_classes": 3})
        est.train(array_input_fn(x, y), max_steps=4, hooks=[HostCallHook(fn=lambda step, values: None)])
        est.evaluate(array_input_fn(x, y))
        assert len(list(est.predict(array_input_fn(x, y)))) == 64
        est.export_saved_model(str(tmp_path / f"export{i}"))
    retraced = [m for m in tf_warnings if RETRACING in m]
    assert not retraced, retraced
