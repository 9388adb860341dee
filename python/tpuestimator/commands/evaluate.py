"""`tpuestimator evaluate MODEL_DIR`: evaluate the latest checkpoint on every eval example."""
from __future__ import annotations

from tpuestimator.commands.train import add_set_flag, print_metrics


def register(sub) -> None:
    p = sub.add_parser("evaluate", help="evaluate a trained model dir (or run folder) exactly")
    p.add_argument("model_dir", metavar="MODEL_DIR")
    p.add_argument("--data", help="TFRecord pattern to evaluate on instead of the config's data.eval")
    add_set_flag(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from tpuestimator.model_dir_jobs import evaluate_job

    metrics = evaluate_job(args.model_dir, overrides=args.overrides, data_pattern=args.data)
    print("evaluation:")
    print_metrics(metrics)
    return 0
