"""`tpuestimator evaluate MODEL_DIR|EXPORT_DIR`: evaluate the latest checkpoint of a model dir on
every eval example, or an export offline (accuracy, AUC, log-loss, confusion matrix, per-class
table, recorded as a run)."""
from __future__ import annotations

import sys

from tpuestimator.commands.train import add_set_flag, print_metrics


def register(sub) -> None:
    p = sub.add_parser("evaluate", help="evaluate a trained model dir (or run folder), or an export offline")
    p.add_argument("model_dir", metavar="MODEL_DIR|EXPORT_DIR",
                   help="a model dir or run folder (latest checkpoint), or a SavedModel export folder "
                        "(saved_model.pb + assets.extra/tpuestimator.json)")
    p.add_argument("--data", help="TFRecord pattern to evaluate on instead of the training's data.eval")
    add_set_flag(p)
    export = p.add_argument_group("export evaluation")
    export.add_argument("--batch-size", type=int, default=256, help="examples per batch (default 256)")
    export.add_argument("--runs-dir", help="where the run record goes (default runs/)")
    export.add_argument("--no-record", action="store_true", help="do not write a run record")
    export.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    from tpuestimator.jobs.export_jobs import is_export_dir

    if is_export_dir(args.model_dir):
        return _run_export(args)
    from tpuestimator.jobs.model_dir_jobs import evaluate_job

    metrics = evaluate_job(args.model_dir, overrides=args.overrides, data_pattern=args.data)
    print("evaluation:")
    print_metrics(metrics)
    return 0


def _run_export(args) -> int:
    from tqdm import tqdm

    from tpuestimator.errors import ConfigError
    from tpuestimator.jobs.export_jobs import evaluate_export

    if args.overrides:
        raise ConfigError("--set", args.overrides, "no --set with an export (its configuration is fixed)")
    if args.batch_size < 1:
        raise ConfigError("--batch-size", args.batch_size, "an integer >= 1")
    with tqdm(unit=" examples", disable=args.quiet or not sys.stderr.isatty(), file=sys.stderr) as bar:
        result = evaluate_export(args.model_dir, data_pattern=args.data, batch_size=args.batch_size,
                                 runs_dir=args.runs_dir, record=not args.no_record, progress=bar.update)
    print("evaluation:")
    print_metrics({k: result[k] for k in ("accuracy", "auc", "log_loss", "macro_precision", "macro_recall",
                                          "macro_f1", "num_examples") if result.get(k) is not None})
    print("per class:")
    print(f"  {'class':<14} {'precision':>9} {'recall':>9} {'f1':>9} {'support':>8}")
    for row in result["per_class"]:
        print(f"  {str(row['class'])[:14]:<14} {row['precision']:>9.4f} {row['recall']:>9.4f} {row['f1']:>9.4f} "
              f"{row['support']:>8d}")
    print("confusion matrix (rows: true class, columns: predicted):")
    for name, row in zip(result["class_names"], result["confusion_matrix"]):
        print(f"  {str(name)[:14]:<14} " + " ".join(f"{v:>5d}" for v in row))
    if result.get("run_dir"):
        print(f"run: {result['run_dir']}")
    return 0
