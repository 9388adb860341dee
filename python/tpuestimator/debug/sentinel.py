"""The NaN/Inf sentinel's report and repro bundle.

The sentinel (`tpuestimator.core.controller.check_finite`, on by default: `debug.nan_sentinel`)
checks the loop's mean loss and every weight at each loop's end and raises `NonFiniteError`
before any checkpoint of the bad state is written. `NonFiniteReportHook` (which `run_job`
registers; add it to `Estimator.train(hooks=...)` elsewhere) then calls `write_report`, which
writes `<model_dir>/debug/nonfinite-step-<N>/`:

- `report.json` / `report.txt`: the loop that failed, which value went non-finite (loss or
  weights, and the non-finite variables), the last good checkpoint, the first non-finite step
  found by the host replay (loss, gradients or updated weights, and which variables), and
  the command to replay it.
- `bundle/`: the repro bundle (`tpuestimator.debug.bundle`): the resolved config, the
  offending batch as a TFRecord, the state just before the offending step as a checkpoint.

Normal runs pay nothing: the batch is not recorded while training; after a failure the steps
since the last good checkpoint are replayed on the host (`replay.find_first_nonfinite`).
"""
from __future__ import annotations

import logging
import os
import time
from typing import Any

from tpuestimator.core.hooks import Hook
from tpuestimator.debug import bundle as bundle_io
from tpuestimator.debug.replay import Finding, find_first_nonfinite
from tpuestimator.errors import NonFiniteError
from tpuestimator.system.io import atomic_directory, atomic_write_json, atomic_write_text

logger = logging.getLogger(__name__)

REPORT_JSON = "report.json"
REPORT_TXT = "report.txt"


def _plain(value: Any) -> Any:
    """JSON-able copy: dicts/lists kept, numbers/strings/bools/None kept, anything else repr()."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        return value.item()
    return repr(value)


def _nonfinite_variables(estimator, limit: int = 50) -> list[str]:
    import numpy as np

    bad = []
    for v in estimator.state.sentinel_variables():
        try:
            value = np.asarray(v.numpy())
            if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
                bad.append(getattr(v, "path", v.name))
        except (TypeError, ValueError, AttributeError):
            continue
        if len(bad) >= limit:
            break
    return bad


def _unique_dir(base: str) -> str:
    path, i = base, 1
    while os.path.exists(path):
        i += 1
        path = f"{base}-{i}"
    return path


class NonFiniteReportHook(Hook):
    """Writes the NaN/Inf report and repro bundle when training raises `NonFiniteError`.

    Args:
      job_config: the job's resolved config, copied into the bundle (None: no config.yaml).
    """

    def __init__(self, job_config: dict | None = None):
        self.job_config = job_config

    def on_exception(self, step: int, exc: BaseException) -> None:
        if not isinstance(exc, NonFiniteError) or exc.report_path or exc.loop_start is None:
            return
        try:
            write_report(self.estimator, exc, loop_start=exc.loop_start, loss=exc.loss, job_config=self.job_config)
        except Exception:  # noqa: BLE001 - the report is a diagnosis aid; the NonFiniteError must surface
            logger.exception("could not write the NaN/Inf report")


def write_report(estimator, error, *, loop_start: int, loss: float, out_dir: str | None = None,
                 max_replay_steps: int = 20_000, job_config: dict | None = None) -> str:
    """Writes the report and repro bundle for `error` (a `NonFiniteError`); returns the folder.

    Also sets `error.report_path` and appends the report's location and the replay command
    to the error's message.
    """
    import yaml

    t0 = time.perf_counter()
    step = int(error.step)
    final = _unique_dir(out_dir or os.path.join(estimator.model_dir, "debug", f"nonfinite-step-{step}"))
    bad_vars = _nonfinite_variables(estimator)
    config = estimator.config
    replicas = estimator.num_replicas
    replica_batch = config.train_batch_size // replicas
    with atomic_directory(final) as tmp:
        bundle_dir = os.path.join(str(tmp), "bundle")
        os.makedirs(bundle_dir)
        try:
            finding = find_first_nonfinite(
                estimator, fail_step=step,
                bundle_checkpoint_prefix=os.path.join(bundle_dir, bundle_io.CHECKPOINT_DIR, "ckpt"),
                max_steps=max_replay_steps)
        except Exception as exc:  # noqa: BLE001 - the report is still written, saying why
            logger.exception("the host replay of the failed loop failed")
            finding = Finding(False, start_checkpoint=estimator.state.latest_checkpoint(),
                              note=f"the host replay failed: {type(exc).__name__}: {exc}")
        feature_spec = {k: [list(s), d] for k, (s, d) in estimator.state.feature_spec.items()}
        labels_dtype = None
        if finding.reproduced:
            features = {k: _concat([b[0][k] for b in finding.batches]) for k in finding.batches[0][0]}
            labels = None if finding.batches[0][1] is None else _concat([b[1] for b in finding.batches])
            labels_dtype = None if labels is None else str(labels.dtype)
            bundle_io.write_batches(os.path.join(bundle_dir, bundle_io.BATCH_FILE), [(finding.step, features, labels)])
        final_bundle = os.path.join(final, "bundle")
        checkpoint_rel = os.path.relpath(finding.checkpoint, bundle_dir) if finding.checkpoint else None
        model_ref = bundle_io.model_reference(estimator.model_fn)
        if job_config is not None:
            atomic_write_text(os.path.join(bundle_dir, "config.yaml"),
                              yaml.safe_dump(_plain(job_config), sort_keys=False))
        check = finding.check
        first = None
        if finding.reproduced and check is not None:
            first = {"step": finding.step, "what": check.what(), "loss": check.loss,
                     "bad_gradients": check.bad_gradients, "bad_weights": check.bad_weights}
        bundle_io.write_json(bundle_dir, {
            "step": finding.step if finding.reproduced else None,
            "failed_loop": [loop_start + 1, step],
            "what": error.what,
            "model": model_ref,
            "params": _plain(estimator.params),
            "replica_batch": replica_batch,
            "num_replicas": replicas,
            "global_batch": config.train_batch_size,
            "precision": config.precision,
            "seed": config.seed,
            "jit_compile": config.jit_compile,
            "feature_spec": feature_spec,
            "labels_dtype": labels_dtype,
            "checkpoint": checkpoint_rel,
            "last_good_checkpoint": error.last_good_checkpoint,
            "model_dir": os.path.abspath(estimator.model_dir),
        })
        replay_cmd = f"tpuestimator debug replay {final_bundle}" if finding.reproduced else None
        report = {
            "error": "NonFiniteError",
            "detected_by": "nan_sentinel",
            "global_step": step,
            "failed_loop": {"first_step": loop_start + 1, "last_step": step},
            "what": error.what,
            "loop_mean_loss": loss,
            "nonfinite_variables": bad_vars,
            "last_good_checkpoint": error.last_good_checkpoint,
            "first_nonfinite": first,
            "reproduced_on_host": finding.reproduced,
            "replayed_from": finding.start_checkpoint or "initial weights (no checkpoint yet)",
            "replayed_steps": finding.replayed_steps,
            "note": finding.note,
            "bundle": final_bundle,
            "bundle_checkpoint": os.path.join(final_bundle, checkpoint_rel) if checkpoint_rel else None,
            "model": model_ref,
            "replay_command": replay_cmd,
            "report_seconds": round(time.perf_counter() - t0, 3),
            "hints": ["lower params.learning_rate (or clip gradients in the model function)",
                      "check the input data: data.assertions (finite, min, max) fail on the bad record",
                      "rerun with debug.check_numerics: true, or run the replay command, to name the op"],
        }
        atomic_write_json(os.path.join(str(tmp), REPORT_JSON), report)
        atomic_write_text(os.path.join(str(tmp), REPORT_TXT), format_report(report))
    os.chmod(final, 0o755)  # atomic_directory's temp folder is private; the report is not
    error.report_path = final
    extra = f" Report: {os.path.join(final, REPORT_TXT)}."
    if replay_cmd:
        extra += f" Name the op with: {replay_cmd}"
    error.args = (str(error) + extra, *error.args[1:])
    logger.error("NaN/Inf report written to %s", final)
    return final


def _concat(arrays):
    import numpy as np

    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays, axis=0)


def format_report(report: dict) -> str:
    """The human-readable report.txt."""
    loop = report["failed_loop"]
    lines = [
        "NaN/Inf sentinel report",
        "=======================",
        f"Training stopped at global step {report['global_step']}: the {report['what']} became NaN or Inf in the "
        f"loop of steps {loop['first_step']}..{loop['last_step']} (loop mean loss: {report['loop_mean_loss']}).",
        f"Last good checkpoint: {report['last_good_checkpoint'] or 'none (no checkpoint was saved yet)'}",
        "No checkpoint of the non-finite state was written.",
    ]
    if report["nonfinite_variables"]:
        lines.append("Non-finite variables (weights, optimizer state) at detection: " + ", ".join(report["nonfinite_variables"][:20])
                     + (" ..." if len(report["nonfinite_variables"]) > 20 else ""))
    first = report.get("first_nonfinite")
    lines.append("")
    if first:
        detail = {"loss": "the loss", "gradients": "the gradients of " + ", ".join(first["bad_gradients"][:8]),
                  "weights": "the weights or optimizer state after the update: " + ", ".join(first["bad_weights"][:8])}[first["what"]]
        lines += [
            f"Host replay from {report['replayed_from']} ({report['replayed_steps']} steps): the first non-finite "
            f"step is step {first['step']}: {detail} (loss {first['loss']}).",
            f"Repro bundle: {report['bundle']}",
            f"  config.yaml, batch.tfrecord (the batch of step {first['step']}), checkpoint/ (the state before it)",
            f"Name the op and its source line with:\n  {report['replay_command']}",
        ]
    else:
        lines += [f"The host replay did not reproduce the failure: {report['note']}",
                  f"Bundle (without a batch): {report['bundle']}"]
    lines += ["", "What to try:"] + [f"  - {h}" for h in report["hints"]]
    return "\n".join(lines) + "\n"
