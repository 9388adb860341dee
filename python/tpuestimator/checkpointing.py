"""Checkpoints of a `TrainingState`: the folder, restore (or warm start), save (sync or async).

Also holds the Keras 3 fix that TensorFlow's asynchronous checkpoint needs.
"""
from __future__ import annotations

import contextlib
import logging
import os

from tpuestimator.devices import tf_config_task
from tpuestimator.errors import ConfigError

logger = logging.getLogger(__name__)


def checkpoint_dir(model_dir: str) -> str:
    """Where this process writes checkpoints. Multi-worker: only the chief writes the real
    checkpoints; other workers must still save (collective ops) but into a scratch folder."""
    task = tf_config_task()
    if task and not (task.get("type") in ("chief",) or (task.get("type") == "worker" and task.get("index") == 0)):
        return os.path.join(model_dir, f".worker_{task.get('type')}_{task.get('index')}")
    return model_dir


def restore(state, warm_start_from: str | None) -> None:
    """Restores the latest checkpoint; without one, warm-starts the model's weights if asked."""
    import tensorflow as tf

    latest = state.manager.latest_checkpoint
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


def save(state, *, asynchronous: bool) -> str:
    """Saves a checkpoint at the current global step; returns its path."""
    import tensorflow as tf

    step = int(state.step)
    with _on_disk_full(state, step):
        if not asynchronous:
            path = state.manager.save(checkpoint_number=step)
        else:
            # The write runs in a background thread; the `checkpoint` file (latest_checkpoint)
            # names the new checkpoint once it is complete. The next save waits for it.
            options = tf.train.CheckpointOptions(experimental_enable_async_checkpoint=True)
            with keras_async_checkpoint_fix():
                path = state.manager.save(checkpoint_number=step, options=options)
    logger.info("saved checkpoint %s", path)
    return path


def sync(state, *, asynchronous: bool) -> None:
    """Waits for an asynchronous checkpoint write to finish (no-op otherwise)."""
    wait = getattr(state.checkpoint, "sync", None) if state is not None else None
    if asynchronous and callable(wait):
        with _on_disk_full(state, int(state.step)):
            wait()


def remove_partial_checkpoint(directory: str, last_complete_step: int | None) -> list[str]:
    """Deletes what failed saves left in `directory`: TensorFlow's `<prefix>-N_temp/` folders
    (only ever partial) and `<prefix>-N.index` / `.data-*` files newer than the last complete
    checkpoint. Returns the removed paths."""
    import re
    import shutil

    removed = []
    last = -1 if last_complete_step is None else int(last_complete_step)
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        temp = re.fullmatch(r".+-\d+_temp", name)
        newer = re.fullmatch(r".+-(\d+)\.(index|data-\d+-of-\d+)", name)
        if temp and os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        elif newer and int(newer.group(1)) > last:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        else:
            continue
        removed.append(path)
    return removed


@contextlib.contextmanager
def _on_disk_full(state, step: int):
    """A full disk during a save: the partial checkpoint removed, one `DiskFullError` naming the
    folder, the free space and the last complete checkpoint (which stays loadable).

    The last complete checkpoint is the one TensorFlow's `checkpoint` file names: it is updated
    only after a checkpoint is fully written (an asynchronous save reports its failure at the
    next save or sync, for an earlier step than the current one).
    """
    import re

    import tensorflow as tf

    from tpuestimator.diskspace import disk_full_error, is_disk_full

    try:
        yield
    except Exception as exc:
        if not is_disk_full(exc):
            raise
        directory = state.manager.directory
        last = tf.train.latest_checkpoint(directory)
        last_step = int(re.search(r"-(\d+)$", last).group(1)) if last and re.search(r"-(\d+)$", last) else None
        removed = remove_partial_checkpoint(directory, last_step)
        failed = sorted({int(m.group(1)) for p in removed if (m := re.search(r"-(\d+)(_temp|\.)", os.path.basename(p)))})
        what = f"checkpoint of step {failed[0] if failed else step}"
        kept = ("Its partial files were removed; " + (
            f"the last complete checkpoint, {last}, is intact and a rerun resumes from it." if last else
            "there is no earlier checkpoint, so a rerun starts from step 0."))
        raise disk_full_error(directory, what, kept=kept,
                              fix="Free some space there (or set run.model_dir / --model-dir to a larger disk) "
                                  "and run the same command again.",
                              last_good_checkpoint=last) from exc


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
