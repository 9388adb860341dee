#!/usr/bin/env python
"""Exact resume: how long the built-in training pipeline takes to deliver its first batch when
a training resumes after 10 million records seen, against after one epoch (issue 19 item 10).

Each configuration builds `make_input_fn(train)` with `params["start_step"]` at that position
and times building the dataset plus reading ONE batch (the skip happens there). The two
alternate repeat by repeat (`common.interleave`); the result is the per-repeat ratio
`ten_million/one_epoch`. Whole epochs are skipped arithmetically (tpuestimator.data.epochs),
so the ratio stays near 1 however many epochs were done; a record-by-record skip would read
the 10 million records first.

    .venv/bin/python benchmarks/bench_resume.py [--smoke] [--records 20000] [--seen 10000000]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.setup_path()

BATCH = 100


def first_batch_seconds(pattern: str, records_seen: int) -> float:
    from tpuestimator.data import make_input_fn

    section = dict(common.data_section(pattern), cache=False)
    start = time.perf_counter()
    fn = make_input_fn(section, "train")
    ds = fn({"batch_size": BATCH, "seed": 1, "start_step": records_seen // BATCH, "num_replicas": 1})
    next(iter(ds))
    return time.perf_counter() - start


def main(argv=None) -> None:
    args = common.standard_args(__doc__.splitlines()[1], argv, extra=lambda p: (
        p.add_argument("--records", type=int, default=None, help="records in the data (one epoch)"),
        p.add_argument("--seen", type=int, default=10_000_000, help="records seen before the resume")))
    records = args.records or (500 if args.smoke else 20_000)
    pattern = common.write_mnist_records(common.temp_dir("bench_resume"), records)
    runners = {"one_epoch": lambda: first_batch_seconds(pattern, records),
               "ten_million": lambda: first_batch_seconds(pattern, args.seen)}
    if not args.smoke:  # a smoke run's times are no measurements: nothing to warm up for
        runners["one_epoch"]()  # warm-up: the first build traces and reads the files into the page cache
    times = common.interleave(runners, args.repeats)
    ratio = common.paired_ratio(times["ten_million"], times["one_epoch"])
    results = {"resume": {"records_per_epoch": records, "records_seen": args.seen, "batch_size": BATCH,
                          "seconds": {name: common.summarize(v) for name, v in times.items()}}}
    path = common.write_results("resume", args.out, smoke=args.smoke, args=vars(args), results=results,
                                ratios={"resume:ten_million/one_epoch": ratio},
                                notes=[f"first batch after {args.seen} records seen vs after one epoch "
                                       f"({records} records)"])
    print(f"ten_million/one_epoch: {common.fmt_ratio(ratio)}  ({path})")


if __name__ == "__main__":
    main()
