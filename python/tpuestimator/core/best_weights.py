"""Early stopping's best weights (`eval.early_stopping.restore_best`): kept at each improving
evaluation in the model dir's `best_weights/`, restored when training ends (`training`) or
when a model dir is exported (`jobs.model_dir_jobs`)."""
from __future__ import annotations

import contextlib
import logging
import os

logger = logging.getLogger(__name__)

# In the model dir, with `early_stopping.restore_best`: the weights of the best evaluation so far,
# `ckpt-<step>` (the checkpoint manager keeps only the newest `keep_checkpoint_max`, and with
# patience 5 the best one is 6 evaluations old when training stops).
BEST_WEIGHTS_DIR = "best_weights"


def keep_best_weights(estimator, step: int) -> str:
    """Keeps the weights of the evaluation at `step` (the best so far) as
    ``<model_dir>/best_weights/ckpt-<step>`` and removes the older ones; returns the prefix.

    The training's own checkpoint of `step`, when it is the latest complete one (an evaluation
    follows its segment's checkpoint), is hard-linked there rather than written again: the same
    files, without a second write of every variable (17-27% of a small table's `dnn` training,
    benchmarks/tables_early_stopping_results.md). Elsewhere (no such checkpoint, a remote or
    link-less file system) they are written."""
    import tensorflow as tf

    from tpuestimator.core.checkpointing import checkpoint_dir

    directory = checkpoint_dir(estimator.model_dir)
    prefix = _best_prefix(estimator, step)
    folder = os.path.dirname(prefix)
    if not _link_saved_checkpoint(directory, step, prefix):
        prefix = estimator.state.checkpoint.write(prefix)
    for name in tf.io.gfile.listdir(folder):
        if not name.startswith(f"ckpt-{step}."):
            tf.io.gfile.remove(os.path.join(folder, name))
    return prefix


def _link_saved_checkpoint(directory: str, step: int, prefix: str) -> bool:
    """Hard-links the files of the latest complete checkpoint in `directory` as `prefix`
    (`keep_best_weights`) when that checkpoint is of `step`; False, with nothing left at
    `prefix`, when it is not or the links fail. The index is linked last: a `prefix` with an
    index has all of its data."""
    import tensorflow as tf

    from tpuestimator.core.checkpointing import checkpoint_path_step

    if "://" in directory:
        return False
    latest = tf.train.latest_checkpoint(directory)
    if latest is None or checkpoint_path_step(latest) != step:
        return False
    source, base = os.path.split(latest)
    suffixes = sorted((name[len(base):] for name in os.listdir(source) if name.startswith(base + ".")),
                      key=lambda suffix: suffix == ".index")
    if ".index" not in suffixes:
        return False
    made = []
    try:
        os.makedirs(os.path.dirname(prefix), exist_ok=True)
        for suffix in suffixes:
            target = prefix + suffix
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target)
            os.link(os.path.join(source, base + suffix), target)
            made.append(target)
    except OSError as e:
        logger.info("best weights: hard links to %s failed (%s); writing them", latest, e)
        for target in made:
            with contextlib.suppress(OSError):
                os.unlink(target)
        return False
    return True


def restore_best_weights(estimator, step: int) -> bool:
    """Loads the weights `keep_best_weights` wrote for `step`; False (with a warning) when
    they are not there (a model dir trained before `restore_best` was on)."""
    import tensorflow as tf

    prefix = _best_prefix(estimator, step)
    if not tf.io.gfile.exists(prefix + ".index"):
        logger.warning("early stopping: the weights of the best evaluation (step %d) are not in %s; the last "
                       "weights are kept", step, os.path.dirname(prefix))
        return False
    estimator.restore_checkpoint(prefix)
    return True


def _best_prefix(estimator, step: int) -> str:
    """``<checkpoint dir>/best_weights/ckpt-<step>``: where `keep_best_weights` keeps the weights
    of `step` and `restore_best_weights` looks for them."""
    from tpuestimator.core.checkpointing import checkpoint_dir

    return os.path.join(checkpoint_dir(estimator.model_dir), BEST_WEIGHTS_DIR, f"ckpt-{step}")
