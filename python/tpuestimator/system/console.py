"""A quiet console for interactive sessions (R through reticulate, tuning loops).

TensorFlow's retracing warnings ("... triggered tf.function retracing"), its C++ log lines and
Python warnings from TensorFlow/Keras are noise to a user who trains many jobs in one session:
`quiet_tensorflow()` silences them, leaving tpuestimator's own progress lines. R's
``tpu_train()`` and ``tpu_tuning_run()`` call it unless the option ``tpuestimatorr.tf_logs``
is TRUE (R/console.R), and ``tpuestimator tune`` calls it unless ``-vv``.
Nothing here imports TensorFlow.
"""
from __future__ import annotations

import logging
import os
import warnings

_NOISY_LOGGERS = ("tensorflow", "absl", "h5py", "PIL", "jax")
_RETRACING = "triggered tf.function retracing"


class _DropRetracing(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            return _RETRACING not in record.getMessage()
        except Exception:  # noqa: BLE001 - a bad record is not ours to judge
            return True


_FILTER = _DropRetracing()


def _import_tensorflow_silently() -> None:
    """Imports TensorFlow with the process's stderr (fd 2) on /dev/null: TF 2.21 writes its
    oneDNN/CPU-feature lines through absl at import, before any log level applies."""
    import sys

    if "tensorflow" in sys.modules:
        return
    try:
        saved = os.dup(2)
    except OSError:
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            sys.stderr.flush()
            os.dup2(devnull, 2)
            try:
                import tensorflow  # noqa: F401
            except Exception:  # noqa: BLE001 - the real import (and its error) happens later, loudly
                pass
        finally:
            os.dup2(saved, 2)
            os.close(devnull)
    finally:
        os.close(saved)


def quiet_tensorflow(quiet: bool = True) -> None:
    """Silences (or, with ``quiet=False``, restores) TensorFlow's console noise.

    Sets ``TF_CPP_MIN_LOG_LEVEL=2`` when unset, imports TensorFlow with stderr silenced (its
    import-time C++ lines ignore every log level), raises the TensorFlow/absl loggers to ERROR, drops retracing warnings, and
    ignores Python warnings raised from TensorFlow and Keras modules.
    """
    if quiet:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        _import_tensorflow_silently()
        for name in _NOISY_LOGGERS:
            logger = logging.getLogger(name)
            logger.setLevel(logging.ERROR)
            if _FILTER not in logger.filters:
                logger.addFilter(_FILTER)
        warnings.filterwarnings("ignore", module=r"(tensorflow|keras|tf_keras)(\..*)?$")
    else:
        for name in _NOISY_LOGGERS:
            logger = logging.getLogger(name)
            logger.setLevel(logging.NOTSET)
            logger.removeFilter(_FILTER)
