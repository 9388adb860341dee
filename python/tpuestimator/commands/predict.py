"""`tpuestimator predict EXPORT_DIR PATTERN... [--out preds.csv|preds.parquet]`: predictions from an
exported SavedModel on TFRecord or image files, streamed batch by batch (JSON lines on stdout
without --out)."""
from __future__ import annotations

import json
import sys


def register(sub) -> None:
    p = sub.add_parser("predict", help="predict with an export on TFRecord or image files (CSV/Parquet or JSON lines)")
    p.add_argument("export_dir", metavar="EXPORT_DIR")
    p.add_argument("files", metavar="PATTERN", nargs="+", help="TFRecord or JPEG/PNG files, or glob patterns")
    p.add_argument("--out", help="write the predictions to this .csv or .parquet file (atomically) instead of "
                                 "printing JSON lines; columns: source, index, class_id, class, prob_<class>...")
    p.add_argument("--batch-size", type=int, default=1024, help="records per batch (default 1024)")
    p.add_argument("--limit", type=int, default=None, help="print at most this many predictions (without --out)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    from tqdm import tqdm

    from tpuestimator.errors import ConfigError

    if args.batch_size < 1:
        raise ConfigError("--batch-size", args.batch_size, "an integer >= 1")
    if args.out is None:
        return _print_lines(args)
    from tpuestimator.jobs.export_jobs import predict_to_file

    with tqdm(unit=" records", disable=args.quiet or not sys.stderr.isatty(), file=sys.stderr) as bar:
        result = predict_to_file(args.export_dir, args.files, args.out, batch_size=args.batch_size,
                                 progress=bar.update)
    print(f"predictions: {result['rows']} rows -> {result['path']}")
    return 0


def _print_lines(args) -> int:
    from tpuestimator.serving.batch_predict import ExportPredictor, iter_predictions
    from tpuestimator.serving.prediction_files import prediction_columns
    from tpuestimator.system.io import json_safe

    predictor = ExportPredictor(args.export_dir)
    printed = 0
    for batch in iter_predictions(predictor, args.files, batch_size=args.batch_size):
        columns = prediction_columns(batch, predictor.class_names)
        for i in range(len(batch)):
            if args.limit is not None and printed >= args.limit:
                return 0
            row = {name: values[i].item() if hasattr(values[i], "item") else values[i]
                   for name, values in columns.items()}
            print(json.dumps(json_safe(row)))
            printed += 1
    return 0
