"""The table input pipeline against the least any parser does, on the same files (issue 21, point 8).

- `bare`: TFRecordDataset -> shuffle -> repeat -> batch -> ONE `tf.io.parse_example` per batch
  -> prefetch (tables_common.bare_dataset): reading and parsing, no preprocessing at all;
- `tpuestimator`: the table input pipeline as training reads it (read, parse per batch, the
  feature columns' preprocessing: normalisation, string lookups), what the Estimator's loop consumes.

Workload: the mixed table of bench_tables_speed.py (12 numeric + 8 string categoricals, written
by tpuestimator's table writer), batch 128. Each repeat times `--batches` batches of each pipeline
on a fresh iterator after `--warmup` batches, interleaved (rotating order); the ratio is
per repeat (records/s ours / bare), with records per CPU second as a load-robust second view.

    nice -n 10 .venv/bin/python benchmarks/bench_tables_input.py [--smoke] [--repeats 9]

Writes `<out>/tables_input.json`. Target: tpuestimator/bare >= 0.9.
"""
from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import tables_common as tc  # noqa: E402

common.setup_path()

import tables_ours  # noqa: E402

TARGET = 0.9


def timed_pass(make_dataset, batches: int, warmup: int) -> dict:
    """Records/s and records per CPU second over `batches` batches of a fresh iterator."""
    it = iter(make_dataset())
    for _ in range(warmup):
        next(it)
    n = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(batches):
        _, labels = next(it)
        n += int(labels.shape[0])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"records_per_sec": n / wall, "records_per_cpu_sec": n / cpu if cpu > 0 else None}


def main(argv=None) -> int:
    def extra(p):
        p.add_argument("--rows", type=int, default=None, help="rows (default 20000; smoke 1000)")
        p.add_argument("--batch", type=int, default=128)
        p.add_argument("--batches", type=int, default=None, help="timed batches per pass (default 300; smoke 5)")
        p.add_argument("--warmup", type=int, default=None, help="untimed batches first (default 20; smoke 1)")

    args = common.standard_args(__doc__.splitlines()[0], argv, extra, default_repeats=9)
    rows = args.rows or (1000 if args.smoke else 20000)
    batches = args.batches or (5 if args.smoke else 300)
    warmup = args.warmup or (1 if args.smoke else 20)
    warnings.filterwarnings("ignore", category=UserWarning)

    machine = common.machine()  # the load average before the run (write_results adds the one after)
    work = common.temp_dir("tables-input")
    df = tc.make_mixed_table(rows, seed=0)
    table_dir = tables_ours.write_table(df, os.path.join(work, "table"))
    pattern = tables_ours.train_pattern(table_dir)
    runners = {
        "bare": lambda: timed_pass(lambda: tc.bare_dataset(pattern, args.batch), batches, warmup),
        "tpuestimator": lambda: timed_pass(lambda: tables_ours.input_dataset(table_dir, args.batch), batches, warmup),
    }
    for run in runners.values():  # first pass: tracing, table building
        run()
    res = common.interleave(runners, args.repeats)
    configs = {name: {k: common.summarize([r[k] for r in runs]) for k in ("records_per_sec", "records_per_cpu_sec")}
               for name, runs in res.items()}
    rate = common.check_target(common.paired_ratio([r["records_per_sec"] for r in res["tpuestimator"]],
                                                   [r["records_per_sec"] for r in res["bare"]]), TARGET)
    cpu = common.paired_ratio([r["records_per_cpu_sec"] for r in res["tpuestimator"]],
                              [r["records_per_cpu_sec"] for r in res["bare"]])
    results = {"workload": {"rows": rows, "batch": args.batch, "batches": batches, "warmup": warmup,
                            "features": len(tc.NUMERIC) + len(tc.CATEGORICAL), "pipeline": tables_ours.describe()},
               "configs": configs}
    path = common.write_results("tables_input", args.out, smoke=args.smoke,
                                args={**vars(args), "rows": rows, "batches": batches, "warmup": warmup},
                                results=results,
                                ratios={"tpuestimator/bare": rate, "tpuestimator/bare per CPU second": cpu},
                                targets={"tpuestimator/bare": TARGET}, machine_info=machine)
    for name, c in configs.items():
        print(f"  {name:13s} {common.fmt_ratio(c['records_per_sec'], 0)} records/s")
    print(f"  tpuestimator/bare {common.fmt_ratio(rate)}  target >= {TARGET}: {'met' if rate['met'] else 'MISSED'}")
    print(f"  per CPU second    {common.fmt_ratio(cpu)}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
