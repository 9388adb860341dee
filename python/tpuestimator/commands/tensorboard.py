"""``tpuestimator tensorboard [RUN_OR_DIR ...]``: TensorBoard on runs until Ctrl-C.

With no argument it shows every run of the runs folder; with one run its ``logs/``; with
several, each under its own name (``--logdir_spec``). RUN is a run folder name (or unique
prefix), ``latest``, or any folder. Nothing here imports TensorFlow.
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

DEFAULT_RUNS_DIR = "runs"


def register(subparsers) -> argparse.ArgumentParser:
    """Adds the ``tensorboard`` command to an argparse sub-parsers object."""
    parser = subparsers.add_parser(
        "tensorboard", help="launch TensorBoard on runs (prints the URL; Ctrl-C stops it)",
        description="Launches TensorBoard from this Python on 127.0.0.1 and prints its URL. "
                    "Without RUN it shows every run of --runs-dir.")
    parser.add_argument("targets", nargs="*", metavar="RUN_OR_DIR",
                        help="runs (folder name, unique prefix, 'latest') or folders; default: the runs folder")
    parser.add_argument("--runs-dir", default=DEFAULT_RUNS_DIR, metavar="DIR",
                        help="folder holding the runs (default: %(default)s)")
    parser.add_argument("--port", default="auto", help="port to listen on (default: a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=90.0, metavar="S",
                        help="seconds to wait for TensorBoard to answer (default: %(default)s)")
    parser.set_defaults(func=run)
    return parser


def resolve_targets(targets: Sequence[str], runs_dir: str) -> str | dict[str, str]:
    """What to show: the runs folder, one folder, or {name: folder} for several.

    Raises:
      RunNotFoundError: a target is neither an existing folder nor a run of `runs_dir`.
    """
    from tpuestimator.runs.reading import RunNotFoundError, resolve_run

    if not targets:
        if not Path(runs_dir).is_dir():
            raise RunNotFoundError(f"runs folder {runs_dir!r} does not exist. Train first, pass --runs-dir, "
                                   "or name a folder of TensorBoard event files.")
        return str(runs_dir)
    folders: list[Path] = []
    for target in targets:
        try:
            folders.append(resolve_run(target, runs_dir))
        except RunNotFoundError:
            if Path(target).is_dir():
                folders.append(Path(target))
            else:
                raise
    if len(folders) == 1:
        return str(folders[0])
    named: dict[str, str] = {}
    for folder in folders:
        name = folder.resolve().name
        base, i = name, 2
        while name in named:
            name, i = f"{base}_{i}", i + 1
        named[name] = str(folder)
    return named


def run(args: argparse.Namespace) -> int:
    """Starts TensorBoard, prints its URL and waits; Ctrl-C stops it. Returns the exit code."""
    from tpuestimator.errors import TPUEstimatorError
    from tpuestimator.runs.tensorboard import start_tensorboard

    try:
        logdir = resolve_targets(args.targets, args.runs_dir)
        port = args.port if args.port == "auto" else int(args.port)
        server = start_tensorboard(logdir, port, host=args.host, timeout=args.timeout)
    except ValueError:
        print(f"error: --port {args.port!r} is invalid. Expected a port number or 'auto'.", file=sys.stderr)
        return 2
    except TPUEstimatorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    # Ctrl-C sets a flag instead of raising KeyboardInterrupt wherever the main thread happens
    # to be: an interrupt inside Popen.poll() can leave its wait lock held, and stopping
    # TensorBoard then spins on that lock.
    stop_requested = threading.Event()
    on_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, lambda signum, frame: stop_requested.set()) if on_main_thread else None
    code = 0
    try:
        print(f"TensorBoard {server.url} (pid {server.pid}); press Ctrl-C to stop.", flush=True)
        while server.running:
            if stop_requested.wait(0.5):
                print("\nStopping TensorBoard.", flush=True)
                break
        else:
            print("error: TensorBoard exited:\n" + server.stderr()[-4000:], file=sys.stderr)
            code = 1
    except KeyboardInterrupt:  # off the main thread, Ctrl-C still arrives as the exception
        print("\nStopping TensorBoard.", flush=True)
    finally:
        if on_main_thread:
            signal.signal(signal.SIGINT, previous)
        server.stop()
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tpuestimator.commands.tensorboard ...``."""
    parser = argparse.ArgumentParser(prog="tpuestimator")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["tensorboard", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
