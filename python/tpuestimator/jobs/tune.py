"""Tuning runs: one separate training per combination of flag values, as tfruns's ``tuning_run()``.

    tuning_run("digits.yaml", {"params.learning_rate": [1e-3, 3e-3, 1e-2]})

Each combination is a full job (`tpuestimator.jobs.job.run_job`) with the combination's values as
``--set`` overrides, its OWN new model dir (``<runs>/.models/tune-<stamp>-<n>``, so no
combination resumes another's checkpoint; docs/RUN_FORMAT.md, "Model dirs"), and its own run
folder, tagged with the ``tuning_run`` property (the tuning's start stamp) and its flags.
Compare them with ``ls_runs(order="eval_loss")`` (R) or ``tpuestimator runs ls --sort
eval_loss --ascending``.

An interrupted tuning continues (`tpuestimator tune` installs SIGTERM/SIGINT handlers,
``handle_signals=True``): a signal stops the current combination at a checkpoint (its run is
recorded ``interrupted``) and ends the tuning; the tuning's state
(``<runs>/.models/tuning-<key>.json``: its stamp, its combinations, which are finished) is kept,
and the SAME call again (same config file and text, grid, sample, overrides, runs folder)
continues it: finished combinations are skipped, the interrupted one resumes from its
checkpoint in its model dir. A tuning whose combinations all finished removes its state, so
running it again starts a new tuning (a combination that failed counts as finished).
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import itertools
import json
import logging
import os
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tpuestimator.config_flags import flag_overrides
from tpuestimator.runs.naming import format_run_name
from tpuestimator.system.io import atomic_write_json

logger = logging.getLogger(__name__)

MODELS_DIR = ".models"


def _as_list(values: Any) -> list:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        return [values]
    return list(values)


def flag_grid(flags: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every combination of the flag values, the FIRST flag varying fastest (R's expand.grid,
    which tfruns uses)."""
    if not flags:
        raise ValueError("tuning_run: `flags` is empty. Expected: at least one flag with its values, e.g. "
                         "{'params.learning_rate': [1e-3, 3e-3]}.")
    names = list(flags)
    values = []
    for name in names:
        vals = _as_list(flags[name])
        if not vals:
            raise ValueError(f"tuning_run: flag {name!r} has no values. Expected: one or more values.")
        values.append(vals)
    combos = []
    for combo in itertools.product(*reversed(values)):
        combos.append(dict(zip(names, reversed(combo))))
    return combos


def sample_grid(combos: Sequence[dict], sample: float | None, rng: random.Random | None = None) -> list[dict]:
    """A random fraction `sample` (0 < sample <= 1) of the combinations, in grid order; all of
    them for None or 1. At least one combination is kept."""
    if sample is None or sample == 1:
        return list(combos)
    if not isinstance(sample, (int, float)) or isinstance(sample, bool) or not 0 < sample <= 1:
        raise ValueError(f"tuning_run: `sample` must be a fraction in (0, 1]. Received: sample={sample!r}.")
    n = max(1, round(len(combos) * sample))
    picked = sorted((rng or random.Random()).sample(range(len(combos)), n))
    return [combos[i] for i in picked]


def tuning_model_dir(runs_dir: str | os.PathLike, stamp: str, index: int) -> str:
    """The new model dir of combination `index` (1-based) of the tuning started at `stamp`."""
    return os.path.join(str(runs_dir), MODELS_DIR, f"tune-{stamp}-{index:03d}")


def tuning_state_path(runs_dir: str | os.PathLike, config: Any, flags: Mapping[str, Any], sample: float | None,
                      overrides: Sequence[str]) -> str:
    """Where the state of THIS tuning is kept: keyed by what defines it (the config file's path
    and text, or the dict; the grid in order; the sample fraction; the overrides)."""
    if isinstance(config, (str, os.PathLike)):
        path = os.path.abspath(os.fspath(config))
        try:
            with open(path, encoding="utf-8") as f:
                source = [path, f.read()]
        except OSError:
            source = [path]
    else:
        source = getattr(config, "raw", config)
    what = json.dumps([source, [[str(k), _as_list(v)] for k, v in flags.items()], sample, list(overrides)],
                      sort_keys=True, default=str)
    return os.path.join(str(runs_dir), MODELS_DIR, f"tuning-{hashlib.sha1(what.encode()).hexdigest()[:16]}.json")


def read_tuning_state(path: str) -> dict | None:
    """A kept tuning state ({stamp, combos, finished}), or None when there is none (or unreadable)."""
    try:
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
    except (OSError, ValueError):
        return None
    ok = isinstance(state, dict) and isinstance(state.get("stamp"), str) and isinstance(state.get("combos"), list) \
        and isinstance(state.get("finished"), list)
    return state if ok else None


def tuning_run(config: Any, flags: Mapping[str, Any], *, sample: float | None = None,
               overrides: Iterable[str] = (), runs_dir: str | None = None, export: bool = True,
               on_run: Callable[[int, int, dict], Any] | None = None, rng: random.Random | None = None,
               handle_signals: bool = False, **job_kwargs: Any) -> list:
    """Trains one separate run per combination of `flags` values.

    Args:
      config: a YAML/JSON path, a dict or a `JobConfig` (as `run_job`).
      flags: {flag: values}, e.g. ``{"params.learning_rate": [1e-3, 3e-3]}``; a flag is a
        dotted config field or a short name (``learning_rate``), as `config_flags` reads them.
        A flag that names no field is an error before anything is trained.
      sample: train only this random fraction of the combinations (tfruns's ``sample``).
      overrides: ``--set`` overrides applied to every combination (before the flag values).
      runs_dir: the runs folder (default ``run.runs_dir``, else ``runs``).
      export: False to skip the exporters.
      on_run: ``on_run(i, n, combination)`` before each training (progress lines).
      rng: the random source of `sample`.
      handle_signals: SIGTERM/SIGINT stop the tuning (module docstring): the current
        combination at a checkpoint, recorded interrupted; then `TrainingInterrupted`. The
        CLI sets it.
      job_kwargs: passed on to `run_job` (``model_fn``, ``hooks``, ``progress``...).

    Returns:
      One `JobResult` per combination trained by this call, in order (a continued tuning:
      the combinations it trained). A combination that fails is logged and skipped (its run is
      recorded as failed); when every combination fails, the last error is raised.

    Raises:
      TrainingInterrupted: a signal stopped the tuning; the same call continues it.
    """
    from tpuestimator.config import load_config
    from tpuestimator.jobs.interrupts import EXIT_CODES, StopOnSignal, TrainingInterrupted
    from tpuestimator.jobs.job import run_job

    overrides = list(overrides)
    grid = flag_grid(flags)
    base = load_config(config, overrides) if not hasattr(config, "raw") else config
    flag_overrides(base, grid[0])  # a misspelt flag (field or short name) fails here, not once per combination
    runs_dir = runs_dir or base.run.runs_dir or "runs"
    state_path = tuning_state_path(runs_dir, config, flags, sample, overrides)
    state = read_tuning_state(state_path)
    if state is not None:
        logger.info("Continuing the tuning %s: %d of %d combinations finished (%s)", state["stamp"],
                    len(state["finished"]), len(state["combos"]), state_path)
    else:
        state = {"stamp": format_run_name(_dt.datetime.now(tz=_dt.timezone.utc).timestamp()),
                 "combos": sample_grid(flag_grid(flags), sample, rng), "finished": []}
        atomic_write_json(state_path, state)
    stamp, combos = state["stamp"], state["combos"]
    stopper = StopOnSignal() if handle_signals else None
    if stopper is not None:
        stopper.install()   # between combinations; each run_job installs its own while it trains
    results, last_error = [], None
    try:
        for i, combo in enumerate(combos, start=1):
            if i in state["finished"]:
                continue
            if stopper is not None and stopper.received is not None:
                sig = stopper.received
                raise TrainingInterrupted(
                    f"Tuning stopped by {stopper.signal_name} before combination {i}/{len(combos)}; run the same "
                    "command again to continue with the combinations not finished.",
                    signal_name=stopper.signal_name, exit_code=EXIT_CODES[sig], step=None, checkpoint=None)
            if on_run is not None:
                on_run(i, len(combos), combo)
            logger.info("Tuning run %d/%d: %s", i, len(combos), ", ".join(f"{k}={v}" for k, v in combo.items()))
            these = overrides + flag_overrides(base, combo)
            model_dir = tuning_model_dir(runs_dir, stamp, i)
            try:
                result = run_job(config, overrides=these, model_dir=model_dir, runs_dir=runs_dir, export=export,
                                 handle_signals=handle_signals, **job_kwargs)
            except TrainingInterrupted:
                _tag_runs(runs_dir, model_dir, stamp, i)
                raise
            except Exception as exc:  # noqa: BLE001 - one failed combination must not stop the others
                logger.error("Tuning run %d/%d (%s) failed: %s", i, len(combos), combo, exc)
                last_error = exc
                _tag_runs(runs_dir, model_dir, stamp, i)
            else:
                if result.run_dir:
                    from tpuestimator.runs.record import RunRecorder

                    RunRecorder(result.run_dir, start=0).set_properties(tuning_run=stamp, tuning_index=i)
                results.append(result)
            state["finished"].append(i)
            atomic_write_json(state_path, state)
    finally:
        if stopper is not None:
            stopper.restore()
    os.remove(state_path)   # every combination finished: the same call again is a new tuning
    if not results and last_error is not None:
        raise last_error
    return results


def _tag_runs(runs_dir: str, model_dir: str, stamp: str, index: int) -> None:
    """Tags the runs a combination recorded without a result (failed, interrupted) as the
    tuning's: found by their ``model_dir`` property."""
    from tpuestimator.runs.query import ls_runs
    from tpuestimator.runs.record import RunRecorder

    wanted = os.path.abspath(model_dir)
    for row in ls_runs(runs_dir):
        if row.get("model_dir") == wanted and not row.get("tuning_run"):
            RunRecorder(row["run_dir"], start=0).set_properties(tuning_run=stamp, tuning_index=index)
