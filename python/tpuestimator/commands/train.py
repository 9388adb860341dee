"""`tpuestimator train CONFIG`: train, evaluate, export and record a run."""
from __future__ import annotations

import logging
import os
import sys


def add_set_flag(parser) -> None:
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config field, e.g. --set train.max_steps=500 (repeatable)")


def register(sub) -> None:
    p = sub.add_parser("train", help="train, evaluate and export from a config; records the run",
                       description="Train from CONFIG; a rerun with the same settings and model dir resumes from its latest "
                                   "checkpoint, other settings fail unless --resume (see docs/RUN_FORMAT.md).")
    p.add_argument("config", metavar="CONFIG", help="YAML or JSON config file")
    add_set_flag(p)
    p.add_argument("--model-dir", help="checkpoint folder (default: run.model_dir, else models/<name>)")
    p.add_argument("--runs-dir", help="where run records go (default: run.runs_dir, else runs/)")
    p.add_argument("--no-record", action="store_true", help="do not write a run record")
    p.add_argument("--no-export", action="store_true", help="skip the exporters")
    p.add_argument("--resume", action="store_true",
                   help="continue the model dir's checkpoint even if it was trained with other settings")
    p.set_defaults(func=run)


def print_metrics(metrics: dict, stream=None) -> None:
    stream = stream or sys.stdout  # read at call time: a default of sys.stdout would keep a replaced, closed stream
    for key, value in metrics.items():
        shown = f"{value:.4f}" if isinstance(value, float) else value
        print(f"  {key:<14} {shown}", file=stream)


def restored_best(result) -> bool:
    """Whether the job ended on the weights of an earlier, better evaluation (`restore_best`)."""
    rule = (result.config.get("eval") or {}).get("early_stopping") or {}
    return bool(rule.get("restore_best")) and result.best_step is not None and result.best_step != result.global_step


def run(args) -> int:
    from tpuestimator.cluster.sidecar import run_sidecar_evaluator
    from tpuestimator.cluster.tasks import serve, task_duty
    from tpuestimator.config import load_config
    from tpuestimator.hooks.builtin import ProgressBarHook
    from tpuestimator.jobs.job import run_job
    from tpuestimator.models import resolve_model_fn

    cfg = load_config(args.config, args.overrides)  # fails on a bad field before TensorFlow starts
    model_fn = resolve_model_fn(cfg.model)  # so does one that cannot be imported; resolved once, passed on
    role = task_duty(cfg.run.strategy)  # TF_CONFIG's task: a ps/worker server or the evaluator
    if role == "server":
        info = serve()
        print(f"{info['task']}: the chief has finished; exiting", flush=True)
        sys.stderr.flush()
        os._exit(0)  # a tf.distribute.Server cannot be stopped: its threads would keep the process alive
    if role == "evaluator":
        record = run_sidecar_evaluator(cfg, model_dir=args.model_dir, runs_dir=args.runs_dir, model_fn=model_fn)
        steps = ", ".join(str(e["step"]) for e in record["evaluations"]) or "none"
        print(f"side-car evaluator: evaluated the checkpoints of steps {steps}")
        if record["run_dir"]:
            print(f"run record:  {record['run_dir']}")
        return 0
    bar = ProgressBarHook(cfg.train.max_steps)
    loop_lines = logging.getLogger("tpuestimator.hooks.builtin")
    loop_lines_level = loop_lines.level   # put back after the job: `main` may run in-process
    if sys.stderr.isatty():
        # The bar shows steps, steps/s, loss and ETA; the per-loop log lines would tear it.
        loop_lines.setLevel(logging.WARNING)
    try:
        result = run_job(cfg, model_dir=args.model_dir, runs_dir=args.runs_dir, record=not args.no_record,
                         export=not args.no_export, hooks=[bar], resume=args.resume, model_fn=model_fn,
                         handle_signals=True)  # SIGTERM/SIGINT: checkpoint, then exit 143/130
    finally:   # an error's message then starts on its own line, below the bar
        loop_lines.setLevel(loop_lines_level)
        bar.close()
    print(f"trained to global step {result.global_step}" + (" (stopped early)" if result.stopped_early else "")
          + (f"; the best evaluation was step {result.best_step}, its model is evaluated and exported"
             if restored_best(result) else ""))
    if result.metrics:
        print("final evaluation:")
        print_metrics(result.metrics)
    print(f"checkpoints: {result.model_dir}")
    if result.export_dir:
        print(f"export:      {result.export_dir}")
    if result.run_dir:
        print(f"run record:  {result.run_dir}")
    return 0
