"""The side-car evaluator: the `evaluator` task of a TF_CONFIG cluster.

It evaluates each new checkpoint the chief writes to the model dir, on its own machine,
while training goes on: TensorFlow's `tf.keras.utils.SidecarEvaluator` belongs to Keras 2
(`tf.keras` is Keras 3 in TF 2.21 and has none), so this is its loop on the model dir's
checkpoint state (`tf.train.get_checkpoint_state`: every checkpoint the chief keeps, where
`tf.train.checkpoints_iterator` yields only the latest and skips one written during an
evaluation) and the Estimator's `evaluate`. It stops after evaluating
the checkpoint at `train.max_steps`, or when the chief's run has ended and no new checkpoint
came within `timeout_s`.

Where the metrics go: the chief's run record belongs to the chief's process (its
`RunRecorder` rewrites `metrics.json` from memory), so the evaluator never writes the
chief's files. It writes its own file, atomically, into the same run folder:
`tfruns.d/sidecar_evaluations.json` (docs/RUN_FORMAT.md), which `runs.run_info` returns as
`sidecar_evaluations`; and the same file into `<model_dir>/eval_sidecar/` (runs without a
record). The run folder is `run_dir` when given (`TPUESTIMATOR_RUN_DIR`), else the newest run
under `runs_dir` whose `model_dir` property is this model dir.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
from pathlib import Path

from tpuestimator.config import JobConfig, load_config
from tpuestimator.core.checkpointing import checkpoint_path_step
from tpuestimator.core.cluster_task import tf_config_task
from tpuestimator.jobs.from_config import build_estimator, input_fn_for
from tpuestimator.runs import naming
from tpuestimator.runs.reading import read_properties, run_status
from tpuestimator.system.io import atomic_write_json

logger = logging.getLogger(__name__)

FILE_NAME = "sidecar_evaluations.json"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SidecarOptions:
    """How the side-car waits: `timeout_s` without a new checkpoint once the chief's run has
    ended (or with no run to watch) ends it; `poll_s` between looks at the model dir."""

    timeout_s: float = 300.0
    poll_s: float = 1.0


def find_run_dir(model_dir: str, runs_dir: str | None, run_dir: str | None = None) -> Path | None:
    """The chief's run folder for `model_dir` (see the module docstring), or None."""
    explicit = run_dir or os.environ.get("TPUESTIMATOR_RUN_DIR")
    if explicit:
        return Path(explicit)
    root = Path(runs_dir or "runs")
    if not root.is_dir():
        return None
    wanted = os.path.abspath(model_dir)
    runs = sorted((p for p in root.iterdir() if naming.is_run_dir(p)), key=lambda p: p.name, reverse=True)
    for candidate in runs:
        if read_properties(candidate).get("model_dir") == wanted:
            return candidate
    return None


def _new_checkpoints(model_dir: str, done: set[str]) -> list[str]:
    """The model dir's checkpoints not evaluated yet, oldest first (all the chief keeps, so a
    checkpoint written while the previous one was being evaluated is not skipped)."""
    import tensorflow as tf

    state = tf.train.get_checkpoint_state(model_dir)
    paths = list(state.all_model_checkpoint_paths) if state else []
    return sorted((p for p in paths if p not in done and tf.io.gfile.exists(p + ".index")), key=checkpoint_path_step)


def run_sidecar_evaluator(config, *, model_dir: str | None = None, runs_dir: str | None = None,
                          run_dir: str | None = None, options: SidecarOptions | None = None,
                          model_fn=None) -> dict:
    """Evaluates each new checkpoint in the model dir until the final one (see module docstring).

    Returns:
      {"task", "model_dir", "run_dir", "evaluations": [{"step", "checkpoint", metric...}],
       "final_step", "done"}: what the file holds.
    """
    import tensorflow as tf

    options = options or SidecarOptions()
    cfg = config if isinstance(config, JobConfig) else load_config(config)
    if cfg.run.strategy in ("multi_worker", "parameter_server"):
        # The evaluator is no member of the training cluster: it evaluates on its own devices.
        cfg = cfg.replace(run={"strategy": "auto"})  # only the changed section validated again
    model_dir = model_dir or cfg.run.model_dir or cfg.model_dir
    runs_dir = runs_dir or cfg.run.runs_dir
    max_steps = cfg.train.max_steps
    estimator = build_estimator(cfg, model_dir=model_dir, model_fn=model_fn)
    eval_fn = input_fn_for(cfg, "eval")
    task = tf_config_task() or {"type": "evaluator", "index": 0}
    record = {"task": f"{task.get('type')}:{task.get('index', 0)}", "model_dir": os.path.abspath(model_dir),
              "run_dir": None, "evaluations": [], "final_step": max_steps, "done": False}
    evaluated: set[str] = set()

    def write() -> None:
        found = find_run_dir(model_dir, runs_dir, run_dir)
        record["run_dir"] = str(found) if found else None
        atomic_write_json(os.path.join(model_dir, "eval_sidecar", FILE_NAME), record)
        if found is not None and (found / naming.RECORD_DIR).is_dir():
            atomic_write_json(found / naming.RECORD_DIR / FILE_NAME, record)

    def chief_finished() -> bool:
        found = find_run_dir(model_dir, runs_dir, run_dir)
        return found is None or run_status(found) in ("completed", "failed")

    last_new = time.monotonic()
    reached_final = False
    while not reached_final:
        todo = _new_checkpoints(model_dir, evaluated) if tf.io.gfile.isdir(model_dir) else []
        if not todo:
            if time.monotonic() - last_new > options.timeout_s and chief_finished():
                logger.info("side-car evaluator: no new checkpoint for %.0f s and the chief's run has ended",
                            options.timeout_s)
                break
            time.sleep(options.poll_s)
            continue
        last_new = time.monotonic()
        for path in todo:
            evaluated.add(path)
            metrics = estimator.evaluate(eval_fn, steps=cfg.eval.steps, checkpoint_path=path)
            step = checkpoint_path_step(path)
            record["evaluations"].append({"step": step, "checkpoint": os.path.basename(path),
                                          **{k: v for k, v in metrics.items() if k != "global_step"}})
            logger.info("side-car evaluation of %s: %s", os.path.basename(path), metrics)
            reached_final = max_steps is not None and step >= max_steps
            write()
    record["done"] = True
    write()
    return record
