"""Runs benchmark scripts one after another in this one process, each as `python SCRIPT ARGS`
runs it (`runpy.run_path` as `__main__`, with `sys.argv` set), so that one TensorFlow start-up
serves them all (test_benchmarks_smoke.py: a smoke run measures nothing, and a fresh process
per script cost ~9 CPU seconds each before the script did anything). A script that fails is
recorded, and the next one still runs.

    python bench_smoke_runner.py PLAN.json STATUS.json [PYTHON]

PYTHON (optional): what the scripts start their child Pythons with (`sys.executable` is set to
it): the smoke test gives fork_python.py's launcher, whose runs skip TensorFlow's import.

PLAN.json: a list of {"script": path, "args": [...], "stdout": path (the script's printed
output goes there)}. STATUS.json, rewritten after every script (a run cut short keeps what
finished): {script file name: {"ok": bool, "seconds": float, "cpu_seconds": float (this process
and the children it waited for; runs forked by fork_python.py are not among them), "error":
traceback or ""}}; a script under way is
{"running": true} (if the process dies, the script that killed it is the one left so).
"""
from __future__ import annotations

import contextlib
import json
import os
import resource
import runpy
import sys
import time
import traceback


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_script(script: str, args: list[str], stdout_path: str) -> tuple[bool, str]:
    """(ran to the end with exit status 0, the traceback otherwise)."""
    argv, path = sys.argv, list(sys.path)
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))  # as `python SCRIPT` puts it first
    try:
        with open(stdout_path, "w") as out, contextlib.redirect_stdout(out):
            runpy.run_path(script, run_name="__main__")
        return True, ""
    except SystemExit as exc:   # `sys.exit(main())`: 0 / None is success
        if exc.code in (0, None):
            return True, ""
        return False, f"exited with {exc.code!r}\n{traceback.format_exc()}"
    except KeyboardInterrupt:
        raise
    except BaseException:  # every other failure of the script is its result
        return False, traceback.format_exc()
    finally:  # what a script added to sys.path does not reach the next one
        sys.argv, sys.path[:] = argv, path


def main(plan_path: str, status_path: str, python: str | None = None) -> int:
    if python:
        sys.executable = python
    with open(plan_path) as fh:
        plan = json.load(fh)
    status: dict[str, dict] = {}
    for step in plan:
        name = os.path.basename(step["script"])
        print(f"== {name} {' '.join(step['args'])}", file=sys.stderr, flush=True)
        status[name] = {"running": True}
        write_status(status, status_path)
        t0, cpu0 = time.perf_counter(), cpu_seconds()
        ok, error = run_script(step["script"], step["args"], step["stdout"])
        status[name] = {"ok": ok, "seconds": time.perf_counter() - t0, "cpu_seconds": cpu_seconds() - cpu0,
                        "error": error}
        print(f"== {name}: {'ok' if ok else 'FAILED'} in {status[name]['seconds']:.1f} s "
              f"({status[name]['cpu_seconds']:.1f} CPU s)", file=sys.stderr, flush=True)
        write_status(status, status_path)
    return 0


def write_status(status: dict, path: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(status, fh, indent=1)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
