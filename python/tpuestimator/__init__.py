"""tpuestimator: the TensorFlow 2 successor of TPUEstimator.

One model function (`model_fn(params) -> ModelSpec`) trains, evaluates, predicts and
exports unchanged on CPU, GPU and TPU through `tf.distribute`. Importing this package does
not import TensorFlow; the names below load it when first used.
"""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

__version__ = "0.1.0"

_EXPORTS = {
    "Estimator": "tpuestimator.core.estimator",
    "RunConfig": "tpuestimator.core.estimator",
    "ModelSpec": "tpuestimator.spec",
    "Mode": "tpuestimator.spec",
    "split_element": "tpuestimator.spec",
    "model_inputs": "tpuestimator.spec",
    "TrainingState": "tpuestimator.core.state",
    "InputFn": "tpuestimator.core.input_fn",
    "TrainSpec": "tpuestimator.core.training",
    "EvalSpec": "tpuestimator.core.training",
    "train_and_evaluate": "tpuestimator.core.training",
    "load_config": "tpuestimator.config",
    "JobConfig": "tpuestimator.config",
    "run_job": "tpuestimator.jobs.job",
    "Hook": "tpuestimator.core.hooks",
    "ConfigError": "tpuestimator.errors",
    "DataError": "tpuestimator.errors",
    "NonFiniteError": "tpuestimator.errors",
    "TPUUnavailableError": "tpuestimator.errors",
    "TPUEstimatorError": "tpuestimator.errors",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    # Lazy: `tpuestimator --help` and R's library(tpuestimatorr) must not pay for TensorFlow.
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tpuestimator' has no attribute {name!r}")
    return getattr(import_module(module), name)


if TYPE_CHECKING:  # pragma: no cover
    from tpuestimator.config import JobConfig, load_config
    from tpuestimator.core.estimator import Estimator, RunConfig
    from tpuestimator.core.hooks import Hook
    from tpuestimator.core.input_fn import InputFn
    from tpuestimator.core.state import TrainingState
    from tpuestimator.core.training import EvalSpec, TrainSpec, train_and_evaluate
    from tpuestimator.errors import ConfigError, DataError, NonFiniteError, TPUEstimatorError, TPUUnavailableError
    from tpuestimator.jobs.job import run_job
    from tpuestimator.spec import Mode, ModelSpec, model_inputs, split_element
