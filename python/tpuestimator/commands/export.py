"""`tpuestimator export MODEL_DIR [--out DIR]`: a SavedModel (or TFLite) from the latest checkpoint."""
from __future__ import annotations

from tpuestimator.commands.train import add_set_flag


def register(sub) -> None:
    p = sub.add_parser("export", help="export the latest checkpoint as a versioned SavedModel")
    p.add_argument("model_dir", metavar="MODEL_DIR")
    p.add_argument("--out", help="export base folder (default: MODEL_DIR/export/manual)")
    p.add_argument("--format", choices=("saved_model", "tflite"), default="saved_model")
    add_set_flag(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from tpuestimator.model_dir_jobs import export_job

    path = export_job(args.model_dir, args.out, format=args.format, overrides=args.overrides)
    print(f"export: {path}")
    return 0
