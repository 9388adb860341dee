"""`tpuestimator predict EXPORT_DIR PATTERN... [--out preds.csv|preds.parquet]`: predictions from an
exported SavedModel on TFRecord or image files, streamed batch by batch (JSON lines on stdout
without --out); for a table model, on one CSV or Parquet table read chunk by chunk
(`--chunk-rows`)."""
from __future__ import annotations

import json
import sys


def register(sub) -> None:
    p = sub.add_parser("predict", help="predict with an export on TFRecord or image files (CSV/Parquet or JSON lines)")
    p.add_argument("export_dir", metavar="EXPORT_DIR")
    p.add_argument("files", metavar="PATTERN", nargs="+", help="TFRecord or JPEG/PNG files, or glob patterns; for a "
                                                               "table model: one .csv or .parquet table")
    p.add_argument("--out", help="write the predictions to this .csv or .parquet file (atomically) instead of "
                                 "printing JSON lines; columns: source, index, class_id, class, prob_<class>...")
    p.add_argument("--batch-size", type=int, default=1024, help="records per batch (default 1024)")
    p.add_argument("--chunk-rows", type=int, default=65536,
                   help="a table file's rows read (and predicted, and written) at a time (default 65536)")
    p.add_argument("--limit", type=int, default=None, help="print at most this many predictions (without --out)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    from tqdm import tqdm

    from tpuestimator.errors import ConfigError

    if args.batch_size < 1:
        raise ConfigError("--batch-size", args.batch_size, "an integer >= 1")
    tables = [f for f in args.files if f.lower().endswith(TABLE_SUFFIXES)]
    if tables:
        return _predict_table(args, tables)
    if args.out is None:
        return _print_lines(args)
    from tpuestimator.jobs.export_jobs import predict_to_file

    with tqdm(unit=" records", disable=args.quiet or not sys.stderr.isatty(), file=sys.stderr) as bar:
        result = predict_to_file(args.export_dir, args.files, args.out, batch_size=args.batch_size,
                                 progress=bar.update)
    print(f"predictions: {result['rows']} rows -> {result['path']}")
    return 0


TABLE_SUFFIXES = (".csv", ".parquet", ".pq")


def _predict_table(args, tables: list[str]) -> int:
    """A table model's predictions on one CSV / Parquet table, chunk by chunk."""
    from tqdm import tqdm

    from tpuestimator.errors import ConfigError
    from tpuestimator.system.io import json_safe
    from tpuestimator.tables.predict import iter_table_predictions, predict_table_to_file

    if len(args.files) != 1:
        raise ConfigError("PATTERN", args.files, "one .csv or .parquet table (a table model's input), or TFRecord "
                          "files without tables")
    if args.out is not None:
        with tqdm(unit=" rows", disable=args.quiet or not sys.stderr.isatty(), file=sys.stderr) as bar:
            result = predict_table_to_file(args.export_dir, tables[0], args.out, chunk_rows=args.chunk_rows,
                                           batch_size=args.batch_size, progress=bar.update)
        print(f"predictions: {result['rows']} rows ({result['chunks']} chunks) -> {result['path']}")
        return 0
    printed = 0
    for columns in iter_table_predictions(args.export_dir, tables[0], chunk_rows=args.chunk_rows,
                                          batch_size=args.batch_size, with_rows=True):
        for i in range(len(columns["index"])):
            if args.limit is not None and printed >= args.limit:
                return 0
            print(json.dumps(json_safe({k: v[i].item() if hasattr(v[i], "item") else v[i]
                                        for k, v in columns.items()})))
            printed += 1
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
