"""The `tpuestimator` command line. Thin: parsing and printing only; the work is in the library.

Nothing here imports TensorFlow at import time, so `tpuestimator --help` is fast.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import logging
import sys

from tpuestimator import __version__

# Each module has `register(subparsers)`; its sub-commands set `func(args) -> int`.
# Commands that run without TensorFlow; every other one checks for it before doing anything,
# so a bare `pip install tpuestimator` leaves no half-made run behind.
WITHOUT_TENSORFLOW = ("example", "runs")
TENSORFLOW_MISSING = "TensorFlow is not installed: pip install 'tpuestimator[cpu]' (or [tensorflow], [gpu], [tpu])"
# A full disk exits 3 (the message says what was saved); the other codes: docs/training.md "Crash safety".
EXIT_DISK_FULL = 3
COMMAND_MODULES = ("train", "cluster", "tune", "evaluate", "predict", "export", "check", "example", "data", "runs", "tensorboard",
                   "debug")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tpuestimator",
        description="Train custom TensorFlow models on CPU, GPU and TPU with one model function.")
    parser.add_argument("--version", action="version", version=f"tpuestimator {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv: TensorFlow's too)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:  # a module that cannot be imported is an error, never a command gone quietly
        importlib.import_module(f"tpuestimator.commands.{name}").register(sub)
    return parser


NOISY_LOGGERS = ("absl", "tensorflow", "h5py", "PIL")


@contextlib.contextmanager
def _logging_for(verbose: int):
    """The command's logging: the root logger at INFO (DEBUG with -vv), a stderr handler when the
    root has none, the noisy libraries at WARNING below -vv. Put back as found when the command
    ends: a program or notebook that calls `main` in-process keeps its own settings, and its next
    call gets its own -v (`logging.basicConfig` does nothing once the root has a handler)."""
    import os

    root = logging.getLogger()
    levels = {name: logging.getLogger(name).level for name in ("", *NOISY_LOGGERS)}
    tf_log_level = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    handler = None
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose > 1 else logging.INFO)
    if verbose < 2:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        for noisy in NOISY_LOGGERS:
            logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        yield
    finally:
        if handler is not None:
            root.removeHandler(handler)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        if tf_log_level is None:
            os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
        else:
            os.environ["TF_CPP_MIN_LOG_LEVEL"] = tf_log_level


def main(argv: list[str] | None = None) -> int:
    try:
        return _run(argv)
    except KeyboardInterrupt:  # Ctrl-C (or SIGINT) before the job installed its handlers, e.g. while importing
        print("interrupted", file=sys.stderr)
        return 130


def _run(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if args.command not in WITHOUT_TENSORFLOW and importlib.util.find_spec("tensorflow") is None:
        print(f"error: {TENSORFLOW_MISSING}", file=sys.stderr)
        return 2
    from tpuestimator.errors import TPUEstimatorError, message_syntax

    try:
        # fixes in errors and notes written as flags (--task regression)
        with _logging_for(args.verbose), message_syntax("cli"):
            return int(args.func(args) or 0)
    except TPUEstimatorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        if isinstance(getattr(exc, "exit_code", None), int):  # TrainingInterrupted: 143 (SIGTERM), 130 (SIGINT)
            return exc.exit_code
        if type(exc).__name__ == "DiskFullError":
            return EXIT_DISK_FULL
        return 2 if type(exc).__name__ in ("ConfigError", "DataError", "TPUUnavailableError") else 1


if __name__ == "__main__":
    sys.exit(main())
