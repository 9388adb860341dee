"""What a job's run record says about the job, beyond its metrics (TensorFlow-free):

- `job_flags(cfg)`: the run's flags (``tfruns.d/flags.json``, the HParams plugin's hparams):
  the model, its params, the batch sizes and step counts, the precision, and every other
  field the job overrode (`--set`);
- `planned_rows(cfg)`: how many metric rows the job will write (tfruns's ``epochs``);
- `model_summary(model)`: the Keras model summary (tfruns's ``model`` property);
- `add_nonfinite_report(recorder, exc)`: a failed job's NaN/Inf report copied into its record.

Reads a `JobConfig`; imports neither the job layer nor TensorFlow.
"""
from __future__ import annotations

import logging
import os

from tpuestimator.config import JobConfig
from tpuestimator.runs.metric_rows import planned_row_count

logger = logging.getLogger(__name__)


def job_flags(cfg: JobConfig) -> dict:
    """The run's flags: ``model``, the params, ``train.*``/``eval.*`` batch sizes and step
    counts, ``run.precision``, and other overridden fields with their typed, resolved value."""
    flags = {"model": cfg.model, **cfg.params}
    for section, view in (("train", cfg.train), ("eval", cfg.eval)):
        for key in ("batch_size", "max_steps", "steps", "iterations_per_loop"):
            value = getattr(view, key, None)  # eval has no iterations_per_loop
            if value is not None:
                flags[f"{section}.{key}"] = value
    flags["run.precision"] = cfg.run.precision
    # Other overridden fields join the flags with their typed, resolved value; params are
    # already there under their own names.
    for item in cfg.overrides:
        key = item.partition("=")[0].strip()
        if key.startswith("params.") or key in flags:
            continue
        node = cfg.value_at(key)
        if node is not None and not isinstance(node, (dict, list)):
            flags[key] = node
    return flags


def planned_rows(cfg: JobConfig) -> int | None:
    """The number of metric rows a job from step 0 will write: one per training loop, thinned
    for long runs as `MetricRows` thins them, every evaluation's row kept; None without
    `train.max_steps`. Loops end at `train.iterations_per_loop` steps and at every evaluation
    (`eval.every_n_steps`, and the end), as `TrainController` runs them."""
    max_steps = cfg.train.max_steps
    if not max_steps:
        return None
    per_loop = cfg.train.iterations_per_loop
    every = cfg.eval.every_n_steps if cfg.has_eval_data else None
    ends = list(range(every, max_steps, every)) + [max_steps] if every else [max_steps]
    loops, eval_loops, start = 0, [], 0
    for end in ends:  # one segment per evaluation
        loops += -(-(end - start) // per_loop)
        eval_loops.append(loops)
        start = end
    return planned_row_count(loops, eval_loops if cfg.has_eval_data else ())


def model_summary(model) -> str:
    """The Keras summary of `model` (its repr for a model without one)."""
    lines: list[str] = []
    try:
        model.summary(print_fn=lambda line, *a, **k: lines.append(line), line_length=100)
    except TypeError:
        return repr(model)
    return "\n".join(lines)


def add_nonfinite_report(recorder, exc: BaseException) -> None:
    """Copies the NaN/Inf sentinel's report (not its bundle) into a failed run's record:
    ``nonfinite/report.txt`` + ``report.json`` and the ``nonfinite_report`` property. Does
    nothing when `exc` carries no ``report_path``; never raises (the failure itself must
    still be recorded)."""
    report = getattr(exc, "report_path", None)
    if not report or not os.path.isdir(report):
        return
    try:
        for name in ("report.txt", "report.json"):
            if os.path.exists(os.path.join(report, name)):
                recorder.add_artifact(os.path.join(report, name), f"nonfinite/{name}")
        recorder.set_properties(nonfinite_report=os.path.abspath(report))
    except Exception:  # noqa: BLE001 - recording the failure itself must still happen
        logger.exception("could not copy the NaN/Inf report into the run record")
