"""`tpuestimator check CONFIG`: TPU readiness on a CPU machine."""
from __future__ import annotations

import json

from tpuestimator.commands.train import add_set_flag


def register(sub) -> None:
    p = sub.add_parser("check", help="TPU readiness: batch divisibility, static shapes, XLA compilation")
    p.add_argument("config", metavar="CONFIG")
    add_set_flag(p)
    p.add_argument("--cores", type=int, default=8, help="TPU cores to rehearse (default 8)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from tpuestimator.jobs.check import check_config

    report = check_config(args.config, overrides=args.overrides, num_cores=args.cores)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        for r in report.results:
            print(f"[{'ok' if r.ok else 'FAIL'}] {r.name}: {r.detail}")
        print("TPU-ready" if report.ok else f"{len(report.failures())} check(s) failed")
    return 0 if report.ok else 1
