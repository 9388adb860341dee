"""Checkpoints of a `TrainingState`: the folder, restore (or warm start), save (sync or async).

Also holds the Keras 3 fix that TensorFlow's asynchronous checkpoint needs.
"""
from __future__ import annotations

import contextlib
import logging
import os

from tpuestimator.cluster_role import remove_scratch, scratch_dir, task_role
from tpuestimator.errors import ConfigError

logger = logging.getLogger(__name__)


def checkpoint_dir(model_dir: str) -> str:
    """Where this process writes checkpoints: the model dir, except on a non-chief worker of a
    `TF_CONFIG` cluster, which must still save (MultiWorkerMirroredStrategy reads the
    variables collectively) but into a scratch folder outside the model dir, removed when
    the process ends (`cluster_role.scratch_dir`)."""
    role = task_role()
    if role.in_cluster and not role.is_chief:
        return scratch_dir(role, "checkpoints", model_dir)
    return model_dir


def restore(state, warm_start_from: str | None, model_dir: str | None = None) -> None:
    """Restores the latest checkpoint of `model_dir` (default: the state's checkpoint folder;
    every worker of a cluster restores the chief's); without one, warm-starts the model's
    weights if asked."""
    import tensorflow as tf

    latest = tf.train.latest_checkpoint(model_dir) if model_dir else state.manager.latest_checkpoint
    if latest:
        state.checkpoint.restore(latest).assert_existing_objects_matched()
        logger.info("restored %s at global step %d", latest, state.step)
        return
    if warm_start_from:
        ws = warm_start_from
        path = tf.train.latest_checkpoint(ws) if os.path.isdir(ws) else ws
        if not path:
            raise ConfigError("train.warm_start_from", ws, "a model dir holding a checkpoint, or a checkpoint path")
        tf.train.Checkpoint(model=state.model).restore(path).expect_partial()
        logger.info("warm-started the model's weights from %s", path)


def remove_worker_scratch(state, model_dir: str) -> None:
    """Removes a non-chief worker's scratch checkpoints (`checkpoint_dir`) once it is done."""
    directory = getattr(getattr(state, "manager", None), "directory", None)
    if directory and os.path.abspath(directory) != os.path.abspath(model_dir):
        remove_scratch(directory)


def save(state, *, asynchronous: bool) -> str:
    """Saves a checkpoint at the current global step; returns its path."""
    import tensorflow as tf

    if not asynchronous:
        path = state.manager.save(checkpoint_number=state.global_step)
    else:
        # The write runs in a background thread; the `checkpoint` file (latest_checkpoint)
        # names the new checkpoint once it is complete. The next save waits for it.
        options = tf.train.CheckpointOptions(experimental_enable_async_checkpoint=True)
        with keras_async_checkpoint_fix():
            path = state.manager.save(checkpoint_number=state.global_step, options=options)
    logger.info("saved checkpoint %s", path)
    return path


def sync(state, *, asynchronous: bool) -> None:
    """Waits for an asynchronous checkpoint write to finish (no-op otherwise)."""
    wait = getattr(state.checkpoint, "sync", None) if state is not None else None
    if asynchronous and callable(wait):
        wait()


@contextlib.contextmanager
def keras_async_checkpoint_fix():
    """Makes TF's async checkpoint work with Keras 3 variables, for the duration of a save.

    TF copies every checkpointed object to the host before writing in the background
    (`_copy_trackable_to_cpu`); from the second save on, the copy runs as a `tf.function`.
    Keras 3's TF variable creates a NEW `tf.Variable` for its copy on every call, which a
    `tf.function` refuses ("tf.function only supports singleton tf.Variables created on the
    first call"): with `async_checkpoint: true` the second save failed (TF 2.21, Keras 3.15).
    During the save each Keras variable maps to the host copy of the `tf.Variable` it wraps
    instead: the same checkpoint keys and values (benchmarks/bench_checkpoint.py checks).
    """
    try:
        from keras.src.backend.tensorflow.core import Variable
    except ImportError:  # another Keras layout: nothing to fix
        yield
        return
    original = Variable.__dict__.get("_copy_trackable_to_cpu")
    if original is None:
        yield
        return

    def copy_to_cpu(self, object_map):
        self.value._copy_trackable_to_cpu(object_map)
        object_map[self] = object_map[self.value]

    Variable._copy_trackable_to_cpu = copy_to_cpu
    try:
        yield
    finally:
        Variable._copy_trackable_to_cpu = original
