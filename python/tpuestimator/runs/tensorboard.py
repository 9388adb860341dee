"""Launching TensorBoard on runs, and HParams summaries for comparing runs in it.

`start_tensorboard()` runs ``<this python> -m tensorboard.main`` (not a ``tensorboard``
script from PATH), on 127.0.0.1 and a free port, waits until it answers HTTP and returns a
`TensorBoardServer` (``.url``, ``.stop()``, a context manager). TensorBoard 2.x accepts ONE
folder after ``--logdir``: several runs are shown through the runs folder or
``--logdir_spec name1:dir1,name2:dir2``.

The server runs in its own process group, with ``--load_fast=false`` (no data-server
grandchild), and is stopped with SIGTERM then SIGKILL and reaped, so nothing is left behind;
servers still running when Python exits are stopped then. Nothing here imports TensorFlow at
import time.
"""
from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tpuestimator.errors import TPUEstimatorError
from tpuestimator.system.processes import sigint_held

logger = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
_live: weakref.WeakSet[TensorBoardServer] = weakref.WeakSet()
_live_lock = threading.Lock()


class TensorBoardError(TPUEstimatorError, RuntimeError):
    """TensorBoard could not be started (its stderr is in the message), or a log folder is missing."""


def free_port(host: str = DEFAULT_HOST) -> int:
    """A TCP port that is free on `host` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _no_proxy_opener() -> urllib.request.OpenerDirector:
    # http_proxy in the environment must not capture requests to 127.0.0.1.
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _logs_of(path: Path) -> Path:
    """A run folder's logs/ (TensorBoard events), or the folder itself."""
    from tpuestimator.runs.naming import is_run_dir

    if is_run_dir(path) and (path / "logs").is_dir():
        return path / "logs"
    return path


def logdir_arguments(logdir: str | os.PathLike | Sequence[str | os.PathLike] | Mapping[str, str | os.PathLike]
                     ) -> list[str]:
    """TensorBoard's arguments for one folder, several folders, or {name: folder}.

    One folder gives ``--logdir DIR`` (a run folder: its ``logs/``); several give
    ``--logdir_spec name:dir,...`` named by the folders' names (a run folder's name is its start
    time, which holds no ':' or ',').

    Raises:
      TensorBoardError: a folder does not exist, or a name or path holds ',' or a name ':'.
    """
    if isinstance(logdir, (str, os.PathLike)):
        path = Path(logdir)
        if not path.is_dir():
            raise TensorBoardError(f"logdir {str(path)!r} does not exist. Expected a run folder, a runs folder "
                                   "(e.g. runs/) or a folder of TensorBoard event files.")
        return ["--logdir", str(_logs_of(path).resolve())]
    if isinstance(logdir, Mapping):
        named = [(str(name), Path(folder)) for name, folder in logdir.items()]
    else:
        folders = [Path(p) for p in logdir]
        if len(folders) == 1:
            return logdir_arguments(folders[0])
        named, seen = [], {}
        for folder in folders:
            name = folder.resolve().name or "run"
            seen[name] = seen.get(name, 0) + 1
            named.append((name if seen[name] == 1 else f"{name}_{seen[name]}", folder))
    if not named:
        raise TensorBoardError("logdir is empty. Expected at least one folder.")
    spec = []
    for name, folder in named:
        if not folder.is_dir():
            raise TensorBoardError(f"logdir {str(folder)!r} (run {name!r}) does not exist. Expected a run folder "
                                   "or a folder of TensorBoard event files.")
        path = str(_logs_of(folder).resolve())
        if ":" in name or "," in name or "," in path:
            raise TensorBoardError(f"cannot pass {name!r}: {path!r} to TensorBoard's --logdir_spec: a name may not "
                                   "hold ':' or ',' and a path may not hold ','. Rename the folder or point "
                                   "TensorBoard at the folder above it.")
        spec.append(f"{name}:{path}")
    return ["--logdir_spec", ",".join(spec)]


class TensorBoardServer:
    """A running TensorBoard process. Use `start_tensorboard()` to make one.

    Attributes:
      url: ``http://127.0.0.1:PORT/``.
      port, host, pid: where it listens and its process id.
      args: the command line it was started with.
    """

    def __init__(self, process: subprocess.Popen, *, host: str, port: int, args: list[str], stderr_path: Path):
        self.process = process
        self.host = host
        self.port = port
        self.args = args
        self._stderr_path = stderr_path
        self._stopped = False

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return not self._stopped and self.process.poll() is None

    def stderr(self) -> str:
        """What TensorBoard wrote to stderr so far (its log)."""
        try:
            return self._stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def get(self, path: str, *, data: bytes | None = None, timeout: float = 5.0) -> bytes:
        """An HTTP request to this server (GET, or POST when `data` is given); returns the body."""
        request = urllib.request.Request(self.url.rstrip("/") + "/" + path.lstrip("/"), data=data)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        with _no_proxy_opener().open(request, timeout=timeout) as response:
            return response.read()

    def _signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(sig)

    def stop(self, timeout: float = 5.0) -> None:
        """Stops TensorBoard: SIGTERM to its process group, SIGKILL after `timeout`; reaps it."""
        if self._stopped:
            return
        self._stopped = True
        try:
            if self.process.poll() is None:
                self._signal_group(signal.SIGTERM)
                try:
                    self.process.wait(timeout)
                except subprocess.TimeoutExpired:
                    self._signal_group(signal.SIGKILL)
                    self.process.wait(timeout)
            else:
                self._signal_group(signal.SIGKILL)  # leftovers of the group, if any
        finally:
            with contextlib.suppress(OSError):
                self._stderr_path.unlink()
            with _live_lock:
                _live.discard(self)
        logger.info("TensorBoard on %s stopped", self.url)

    def __enter__(self) -> TensorBoardServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"TensorBoardServer(url={self.url!r}, pid={self.pid}, running={self.running})"


def _wait_until_answering(server: TensorBoardServer, deadline: float) -> str | None:
    """None once the server answers; else why not ('exited' or 'timeout')."""
    opener = _no_proxy_opener()
    while True:
        if server.process.poll() is not None:
            return "exited"
        try:
            with opener.open(server.url + "data/environment", timeout=1.0) as response:
                if response.status == 200:
                    return None
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        if time.monotonic() > deadline:
            return "timeout"
        time.sleep(0.2)


def start_tensorboard(logdir: str | os.PathLike | Sequence[str | os.PathLike] | Mapping[str, str | os.PathLike] = "runs",
                      port: int | str = "auto", *, host: str = DEFAULT_HOST, timeout: float = 90.0,
                      extra_args: Iterable[str] = ()) -> TensorBoardServer:
    """Starts TensorBoard and waits until it answers HTTP.

    Args:
      logdir: a runs folder (every run in it), a run folder (its ``logs/``), a folder of
        event files, a list of folders, or ``{name: folder}``.
      port: a port number, or ``"auto"`` for a free one.
      host: the address to listen on (default 127.0.0.1: this machine only).
      timeout: seconds to wait for TensorBoard to answer.
      extra_args: more TensorBoard flags (e.g. ``["--reload_interval", "1"]``).

    Returns:
      The running `TensorBoardServer`.

    Raises:
      TensorBoardError: TensorBoard is not installed, exited, or did not answer in time (its
        stderr is included), or a folder does not exist.
    """
    import importlib.util

    if importlib.util.find_spec("tensorboard") is None:
        raise TensorBoardError(f"TensorBoard is not installed in {sys.executable}. Install it with "
                               f"`{sys.executable} -m pip install tensorboard`.")
    logdir_args = logdir_arguments(logdir)
    auto = str(port) == "auto"
    attempts = 3 if auto else 1
    last_err = ""
    for _ in range(attempts):
        chosen = free_port(host) if auto else int(port)
        args = [sys.executable, "-m", "tensorboard.main", *logdir_args, "--host", host, "--port", str(chosen),
                "--load_fast=false", *extra_args]
        fd, err_name = tempfile.mkstemp(prefix="tensorboard-", suffix=".stderr")
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        server = None
        try:
            # A Ctrl-C waits until `server` holds the process (processes.py), then stops it, as
            # one while TensorBoard starts up does: nothing is left serving.
            with sigint_held():
                with os.fdopen(fd, "wb") as err_file:
                    process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=err_file, stderr=err_file,
                                               start_new_session=True, env=env)
                server = TensorBoardServer(process, host=host, port=chosen, args=args, stderr_path=Path(err_name))
                with _live_lock:
                    _live.add(server)
            why = _wait_until_answering(server, time.monotonic() + timeout)
        except BaseException:
            if server is not None:
                server.stop()
            raise
        if why is None:
            logger.info("TensorBoard %s serving %s", server.url, " ".join(logdir_args))
            return server
        last_err = server.stderr()
        server.stop()
        in_use = any(text in last_err.lower() for text in ("already in use", "could not bind", "is in use"))
        if why == "exited" and auto and in_use:
            continue
        break
    tail = "\n".join(last_err.strip().splitlines()[-25:]) or "(nothing on stderr)"
    what = ("exited before answering" if why == "exited" else f"did not answer within {timeout:.0f} s")
    raise TensorBoardError(f"TensorBoard ({' '.join(args[1:])}) {what}. Its stderr:\n{tail}")


@atexit.register
def _stop_all() -> None:
    with _live_lock:
        servers = list(_live)
    for server in servers:
        with contextlib.suppress(Exception):
            server.stop(timeout=2.0)


def write_hparams(logs_dir: str | os.PathLike, flags: Mapping[str, Any],
                  metrics: Mapping[str, Any] | None = None, *, trial_id: str | None = None,
                  step: int = 0) -> Path:
    """Writes HParams plugin summaries so TensorBoard compares runs by hyperparameter.

    Writes into `logs_dir` itself (the run's ``logs/``; its ``train``/``eval`` sub-folders
    hold the curves): the session's hyperparameters (`flags` flattened to dotted scalar keys,
    None/NaN left out as in flags.json) and the final `metrics` as scalars at `step`. The
    HParams dashboard then lists every run of the runs folder with its hyperparameters, its
    final metrics and the ``train``/``eval`` scalars.

    Args:
      logs_dir: the run's logs folder.
      flags: the run's hyperparameters (nested allowed).
      metrics: final metric values (non-finite ones are skipped).
      trial_id: the session name; default the run folder's name.
      step: the global step of the final metrics.

    Returns:
      `logs_dir`.
    """
    import math

    import tensorflow as tf
    from tensorboard.plugins.hparams import api as hp

    from tpuestimator.runs.values import flatten_flags, metric_value

    logs_dir = Path(logs_dir)
    logs_dir.mkdir(parents=True, exist_ok=True)
    hparams, _ = flatten_flags(flags)
    if trial_id is None:
        trial_id = logs_dir.parent.name if logs_dir.name == "logs" else logs_dir.name
    writer = tf.summary.create_file_writer(str(logs_dir))
    try:
        with writer.as_default():
            hp.hparams(hparams, trial_id=trial_id)
            for name, value in (metrics or {}).items():
                value = metric_value(value)
                if value is not None and math.isfinite(value) and str(name) not in ("global_step", "step"):
                    tf.summary.scalar(str(name), value, step=int(step))
        writer.flush()
    finally:
        writer.close()
    return logs_dir
