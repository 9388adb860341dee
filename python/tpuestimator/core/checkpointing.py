"""Checkpoints of a `TrainingState`: the folder, restore (or warm start), save (sync or async).

Also holds the Keras 3 fix that TensorFlow's asynchronous checkpoint needs.
"""
from __future__ import annotations

import contextlib
import logging
import os

from tpuestimator.core.cluster_task import remove_scratch, scratch_dir, task_role
from tpuestimator.errors import ConfigError, TPUEstimatorError

logger = logging.getLogger(__name__)


def checkpoint_dir(model_dir: str) -> str:
    """Where this process writes checkpoints: the model dir, except on a non-chief worker of a
    `TF_CONFIG` cluster, which must still save (MultiWorkerMirroredStrategy reads the
    variables collectively) but into a scratch folder outside the model dir, removed when
    the process ends (`cluster_task.scratch_dir`)."""
    role = task_role()
    if role.in_cluster and not role.is_chief:
        return scratch_dir(role, "checkpoints", model_dir)
    return model_dir


class CheckpointMismatchError(TPUEstimatorError, ValueError):
    """The latest checkpoint does not fit the model being built (another architecture: a
    variable's shape or the set of variables changed). The job layer names the changed settings.

    Attributes:
      checkpoint: the checkpoint's path.
      detail: TensorFlow's description of the mismatch.
    """

    def __init__(self, message: str, *, checkpoint: str, detail: str):
        self.checkpoint = checkpoint
        self.detail = detail
        super().__init__(message)


def restore(state, warm_start_from: str | None, model_dir: str | None = None) -> None:
    """Restores the latest checkpoint of `model_dir` (default: the state's checkpoint folder;
    every worker of a cluster restores the chief's); without one, warm-starts the model's
    weights if asked.

    The optimizer's hyperparameters stored in the checkpoint (Keras keeps the learning rate in
    a variable) are set back to the values the model function just built from the config: a
    resumed run trains with the config's learning rate, never silently with the checkpoint's.

    Raises:
      CheckpointMismatchError: the checkpoint's variables do not fit the model.
    """
    import tensorflow as tf

    latest = tf.train.latest_checkpoint(model_dir) if model_dir else state.manager.latest_checkpoint
    if latest:
        configured = optimizer_hyperparameters(state.optimizer)
        checkpoint = state.checkpoint
        if not _has_random_state(latest) and getattr(checkpoint, "random_state", None):
            # written before the random state was checkpointed: restore the rest (resume not exact)
            logger.info("%s holds no random state (an older checkpoint): dropout masks restart", latest)
            checkpoint = tf.train.Checkpoint(model=state.model, optimizer=state.optimizer, step=state.global_step)
        try:
            checkpoint.restore(latest).assert_existing_objects_matched()
        except (ValueError, AssertionError) as exc:
            detail = " ".join(str(exc).split())[:600]
            raise CheckpointMismatchError(
                f"The checkpoint {latest} does not fit the model the model function builds now (its variables "
                f"have other shapes or names): {detail}", checkpoint=latest, detail=detail) from None
        logger.info("restored %s at global step %d", latest, state.step)
        apply_hyperparameters(state.optimizer, configured)
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
def _has_random_state(path: str) -> bool:
    import tensorflow as tf

    return any(name.startswith("random_state/") for name, _ in tf.train.list_variables(path))


# Optimizer hyperparameters Keras 3 stores in variables, hence in checkpoints. The others (Adam's
# betas and epsilon, SGD's momentum, weight decay, clipping) are plain Python attributes: the
# model function sets them from the config in every run, and a learning-rate schedule is a
# Python object too (it reads the restored `iterations`).
HYPERPARAMETERS = ("learning_rate",)


def optimizer_hyperparameters(optimizer) -> dict[str, float]:
    """{name: value} of the optimizer's hyperparameters held in variables (`HYPERPARAMETERS`)."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)  # a LossScaleOptimizer's wrapped optimizer
    out = {}
    for name in HYPERPARAMETERS:
        value = getattr(inner, name, None)
        if value is not None and hasattr(value, "assign"):
            out[name] = float(value.numpy())
    return out


def apply_hyperparameters(optimizer, configured: dict[str, float]) -> dict[str, tuple[float, float]]:
    """Sets the hyperparameters back to `configured` after a restore; returns {name: (checkpoint, config)}
    for those that changed, each logged ("learning_rate 0.003 -> 0.001 from the config")."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    changed = {}
    for name, value in configured.items():
        variable = getattr(inner, name)
        restored = float(variable.numpy())
        if restored != value:
            variable.assign(value)
            changed[name] = (restored, value)
            logger.warning("%s %.6g -> %.6g from the config (the checkpoint's value is replaced)", name, restored,
                           value)
    return changed


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


def checkpoint_path_step(path: str | None) -> int | None:
    """The global step in a checkpoint path (`.../ckpt-1500` -> 1500), None without one."""
    if not path:
        return None
    try:
        return int(path.rsplit("-", 1)[-1])
    except ValueError:
        return None


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

    from tpuestimator.system.diskspace import disk_full_error, is_disk_full

    try:
        yield
    except Exception as exc:
        if not is_disk_full(exc):
            raise
        directory = state.manager.directory
        last = tf.train.latest_checkpoint(directory)
        removed = remove_partial_checkpoint(directory, checkpoint_path_step(last))
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
