"""Tuning runs: one separate training per combination of flag values, as tfruns's ``tuning_run()``.

    tuning_run("digits.yaml", {"params.learning_rate": [1e-3, 3e-3, 1e-2]})

Each combination is a full job (`tpuestimator.job.run_job`) with the combination's values as
``--set`` overrides, its OWN new model dir (``<runs>/.models/tune-<stamp>-<n>``, so no
combination resumes another's checkpoint; docs/RUN_FORMAT.md, "Model dirs"), and its own run
folder, tagged with the ``tuning_run`` property (the tuning's start stamp) and its flags.
Compare them with ``ls_runs(order="eval_loss")`` (R) or ``tpuestimator runs ls --sort
eval_loss --ascending``.
"""
from __future__ import annotations

import datetime as _dt
import itertools
import json
import logging
import os
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tpuestimator.runs.naming import format_run_name

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


def override_text(name: str, value: Any) -> str:
    """``name=value`` as ``--set`` reads it (text from the command line is kept as typed)."""
    if isinstance(value, str):
        return f"{name}={value}"
    if isinstance(value, bool):
        return f"{name}={'true' if value else 'false'}"
    return f"{name}={json.dumps(value)}"


def tuning_model_dir(runs_dir: str | os.PathLike, stamp: str, index: int) -> str:
    """The new model dir of combination `index` (1-based) of the tuning started at `stamp`."""
    return os.path.join(str(runs_dir), MODELS_DIR, f"tune-{stamp}-{index:03d}")


def tuning_run(config: Any, flags: Mapping[str, Any], *, sample: float | None = None,
               overrides: Iterable[str] = (), runs_dir: str | None = None, export: bool = True,
               on_run: Callable[[int, int, dict], Any] | None = None, rng: random.Random | None = None,
               **job_kwargs: Any) -> list:
    """Trains one separate run per combination of `flags` values.

    Args:
      config: a YAML/JSON path, a dict or a `JobConfig` (as `run_job`).
      flags: {dotted config field: values}, e.g. ``{"params.learning_rate": [1e-3, 3e-3]}``.
      sample: train only this random fraction of the combinations (tfruns's ``sample``).
      overrides: ``--set`` overrides applied to every combination (before the flag values).
      runs_dir: the runs folder (default ``run.runs_dir``, else ``runs``).
      export: False to skip the exporters.
      on_run: ``on_run(i, n, combination)`` before each training (progress lines).
      rng: the random source of `sample`.
      job_kwargs: passed on to `run_job` (``model_fn``, ``hooks``, ``progress``...).

    Returns:
      One `JobResult` per combination trained, in order. A combination that fails is logged and
      skipped (its run is recorded as failed); when every combination fails, the last error is raised.
    """
    from tpuestimator.config import check_field, load_config
    from tpuestimator.job import run_job

    overrides = list(overrides)
    combos = sample_grid(flag_grid(flags), sample, rng)
    for name in flags:  # a misspelt field fails here, not once per combination
        check_field(str(name), origin="flag")
    base = load_config(config, overrides) if not hasattr(config, "raw") else config
    runs_dir = runs_dir or base.run.runs_dir or "runs"
    stamp = format_run_name(_dt.datetime.now(tz=_dt.timezone.utc).timestamp())
    results, last_error = [], None
    for i, combo in enumerate(combos, start=1):
        if on_run is not None:
            on_run(i, len(combos), combo)
        logger.info("Tuning run %d/%d: %s", i, len(combos), ", ".join(f"{k}={v}" for k, v in combo.items()))
        these = overrides + [override_text(k, v) for k, v in combo.items()]
        try:
            result = run_job(config, overrides=these, model_dir=tuning_model_dir(runs_dir, stamp, i),
                             runs_dir=runs_dir, export=export, **job_kwargs)
        except Exception as exc:  # noqa: BLE001 - one failed combination must not stop the others
            logger.error("Tuning run %d/%d (%s) failed: %s", i, len(combos), combo, exc)
            last_error = exc
            continue
        if result.run_dir:
            from tpuestimator.runs.record import RunRecorder

            RunRecorder(result.run_dir, start=0).set_properties(tuning_run=stamp, tuning_index=i)
        results.append(result)
    if not results and last_error is not None:
        raise last_error
    return results
