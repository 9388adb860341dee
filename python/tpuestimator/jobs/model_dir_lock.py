"""The model-dir lock: one training per model dir at a time.

Two `tpuestimator train` commands on one model dir used to interleave their checkpoints and
exports and one died with a 40-line ``OSError: Directory not empty`` traceback. A job that
trains now holds ``<model_dir>/tpuestimator.lock`` for its whole run (training, evaluations,
exports, the run record):

- **How**: ``fcntl.flock`` on the lock file: exclusive for a training, shared for
  `evaluate_job` / `export_job` (several evaluations or exports of one model dir may run
  together; none of them while it is being trained, and no training while one runs: they
  would read checkpoints that the training's ``keep_checkpoint_max`` deletes). The kernel
  drops a flock when its process dies, even by SIGKILL, so a dead job never blocks a new one.
- **Who**: the exclusive holder writes its pid, host, start time and command into the file
  (one small write right after it took the lock; a reader that finds it mid-write retries), so
  the error names who holds the model dir. The file is removed when the job ends, on success
  and on exceptions alike (a ``with`` block).
- **Stale locks**: a file left by a killed job on this host (its pid is dead, or reused by a
  later process) is taken over with a logged warning. A file written on ANOTHER host cannot be
  checked from here (its pid means nothing here, and flock is not shared across hosts on
  every network file system): `ModelDirLockedError` says how to remove it once that job is gone.
- **Clusters**: in a TF_CONFIG cluster of several tasks only the chief (``chief``/``master``,
  or worker 0 when the cluster has no chief) takes the lock; the other workers train into the
  same model dir by design (`lock_needed`).
- Model dirs on object stores (``gs://...``) are not locked: there is no file lock there.

Nothing here imports TensorFlow.
"""
from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shlex
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tpuestimator.errors import TPUEstimatorError
from tpuestimator.system.processes import process_alive

logger = logging.getLogger(__name__)

LOCK_FILE = "tpuestimator.lock"
# How long a caller that found the lock held waits for its owner's details to be written.
_OWNER_READ_WAIT_S = 1.0


class ModelDirLockedError(TPUEstimatorError, RuntimeError):
    """Another job holds the model dir (or a lock from another host cannot be checked).

    Attributes:
      model_dir: the model dir.
      lock_path: the lock file.
      owner: what the lock file says about its owner (pid, host, started, command, mode), or {}.
      pid: the owner's process id (None when the lock file does not say: shared holders).
    """

    def __init__(self, message: str, *, model_dir: str, lock_path: str, owner: Mapping[str, Any]):
        self.model_dir = model_dir
        self.lock_path = lock_path
        self.owner = dict(owner)
        self.pid = self.owner.get("pid")
        super().__init__(message)


def owner_alive(owner: Mapping[str, Any]) -> bool:
    """Whether the process a lock file names still runs (this host only: False elsewhere)."""
    return process_alive(owner.get("host"), owner.get("pid"), owner.get("started"))


def lock_needed(tf_config: str | None = None) -> bool:
    """False for the non-chief tasks of a TF_CONFIG cluster of several tasks, True otherwise.

    The workers of one cluster share the chief's model dir on purpose (the chief writes the
    checkpoints, the others a temporary copy); only the chief takes the lock."""
    raw = os.environ.get("TF_CONFIG") if tf_config is None else tf_config
    if not raw:
        return True
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        return True  # cluster_task.read_tf_config raises the clear error for it
    cluster = parsed.get("cluster") if isinstance(parsed, dict) else None
    task = parsed.get("task") if isinstance(parsed, dict) else None
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        return True
    size = sum(len(v) for v in cluster.values() if isinstance(v, (list, dict)))
    if size <= 1:
        return True
    kind, index = task.get("type"), task.get("index", 0)
    if kind in ("chief", "master"):
        return True
    return kind == "worker" and index == 0 and not ({"chief", "master"} & set(cluster))


def _describe(owner: Mapping[str, Any]) -> str:
    if not owner:
        return "a job whose details are not written (an evaluate or export, which share the lock)"
    started = owner.get("started")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if isinstance(started, (int, float)) else "?"
    return (f"pid {owner.get('pid')} on host {owner.get('host')} (a {owner.get('mode', 'train')} job started "
            f"{when}: {owner.get('command') or '?'})")


class ModelDirLock:
    """``with ModelDirLock(model_dir): ...`` holds the model dir for a training (exclusive) or
    an evaluate/export (``shared=True``). See the module docstring for the rules.

    Raises (on entering):
      ModelDirLockedError: another job holds it, or a lock from another host is in the way.
    """

    def __init__(self, model_dir: str | os.PathLike, *, shared: bool = False, command: str | None = None):
        self.model_dir = str(model_dir)
        self.path = os.path.join(self.model_dir, LOCK_FILE)
        self.shared = shared
        self.command = command if command is not None else _command_line()
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def owner(self) -> dict:
        """What the lock file says about its exclusive owner ({} when empty or unreadable)."""
        try:
            text = Path(self.path).read_text(encoding="utf-8")
            value = json.loads(text) if text.strip() else {}
        except (OSError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    def acquire(self) -> ModelDirLock:
        import fcntl

        if self.held:
            return self
        if "://" in self.model_dir:
            logger.info("Model dir %s is on an object store: not locked (no file locks there).", self.model_dir)
            return self
        os.makedirs(self.model_dir, exist_ok=True)
        for _ in range(20):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                if self.shared and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                    logger.info("Model dir %s is read-only here: evaluated/exported without a lock.", self.model_dir)
                    return self
                raise
            try:
                fcntl.flock(fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise self._locked_error() from None
                if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                    logger.warning("The file system of %s has no file locks: the model-dir lock only checks the "
                                   "owner's pid.", self.model_dir)
                    fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                    self._claim(fd)
                    return self
                raise
            # The previous holder may have removed the file between our open() and flock():
            # a lock on that unlinked file would lock nothing.
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self._claim(fd)
                return self
            os.close(fd)
        raise ModelDirLockedError(f"Could not lock model dir {self.model_dir}: {self.path} kept being replaced by "
                                  "other jobs.", model_dir=self.model_dir, lock_path=self.path, owner=self.owner())

    def _claim(self, fd: int) -> None:
        """We hold the flock: check what the file says about a previous owner, then write ours."""
        previous = self.owner()
        try:
            if previous and previous.get("host") != socket.gethostname():
                raise ModelDirLockedError(
                    f"model dir {self.model_dir} is locked by {_describe(previous)}. That lock was written on another "
                    f"host, so this one cannot tell whether that job still runs. If it is no longer running, remove "
                    f"{self.path} and run again; otherwise wait for it to end or train into another folder "
                    "(--model-dir DIR, R: model_dir =).", model_dir=self.model_dir, lock_path=self.path,
                    owner=previous)
            if previous and previous.get("pid") != os.getpid() and owner_alive(previous):
                # flock said free but the owner runs: a file system whose locks do not work.
                raise self._locked_error(previous)
            if previous and previous.get("pid") != os.getpid():
                logger.warning("Model dir %s: took over the stale lock of %s, which ended without releasing it "
                               "(killed?).", self.model_dir, _describe(previous))
            if not self.shared:
                info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(),
                        "command": self.command, "mode": "train"}
                os.ftruncate(fd, 0)
                os.pwrite(fd, (json.dumps(info) + "\n").encode("utf-8"), 0)
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def _locked_error(self, owner: Mapping[str, Any] | None = None) -> ModelDirLockedError:
        if owner is None:
            deadline = time.monotonic() + _OWNER_READ_WAIT_S
            owner = self.owner()
            while not owner and time.monotonic() < deadline:  # the holder may be writing its details
                time.sleep(0.05)
                owner = self.owner()
        if self.shared:  # only a training holds it exclusively
            return ModelDirLockedError(
                f"model dir {self.model_dir} is being trained by {_describe(owner)}; an evaluate or export must not "
                "read it meanwhile (the training's keep_checkpoint_max deletes the checkpoints it would read). "
                "Choose one: wait for that training to end, or evaluate/export one of its exports instead.",
                model_dir=self.model_dir, lock_path=self.path, owner=owner)
        fix = ("wait for it to end, train into another folder (--model-dir DIR, R: model_dir =, or run.model_dir), "
               f"or, if that job is gone, remove {self.path}")
        return ModelDirLockedError(
            f"model dir {self.model_dir} is in use by {_describe(owner)}; two jobs must not train in one model dir "
            f"at once (they would overwrite each other's checkpoints and exports). Choose one: {fix}.",
            model_dir=self.model_dir, lock_path=self.path, owner=owner)

    def release(self) -> None:
        """Releases the lock and removes the lock file (a reader removes it only when it is the last)."""
        import fcntl

        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if self.shared:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the last reader removes the file
                except OSError:
                    return
            if os.path.exists(self.path) and os.fstat(fd).st_ino == os.stat(self.path).st_ino:
                os.unlink(self.path)
        except OSError:
            logger.debug("Could not remove %s", self.path, exc_info=True)
        finally:
            os.close(fd)

    def __enter__(self) -> ModelDirLock:
        return self.acquire()

    def __exit__(self, exc_type, exc, tb) -> bool:
        self.release()
        return False


def _command_line() -> str:
    argv = [a for a in sys.argv if a]
    if not argv:
        return f"{os.path.basename(sys.executable)} (embedded)"
    return shlex.join([os.path.basename(argv[0]), *argv[1:]])


def model_dir_lock(model_dir: str | os.PathLike, *, shared: bool = False) -> contextlib.AbstractContextManager:
    """The lock a job on `model_dir` takes: `ModelDirLock`, or nothing for a non-chief cluster task."""
    return ModelDirLock(model_dir, shared=shared) if lock_needed() else contextlib.nullcontext()
