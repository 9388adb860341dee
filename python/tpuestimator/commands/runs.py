"""``tpuestimator runs``: list, show, compare and archive training runs (tfruns's format).

    tpuestimator runs ls [--runs-dir DIR] [--filter COL=VALUE] [--sort COL] [--latest N] [--check]
    tpuestimator runs show [RUN] [--html OUT]
    tpuestimator runs compare [RUN1 [RUN2]] [--html OUT]
    tpuestimator runs clean [RUN ...] [--yes]

RUN is a run folder name (or a unique prefix of one), a path to a run folder, or ``latest``.
Nothing here imports TensorFlow.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

DEFAULT_RUNS_DIR = "runs"


def _add_runs_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs-dir", default=DEFAULT_RUNS_DIR, metavar="DIR",
                        help="folder holding the runs (default: %(default)s, as tfruns)")


def register(subparsers) -> argparse.ArgumentParser:
    """Adds the ``runs`` command and its sub-commands to an argparse sub-parsers object."""
    parser = subparsers.add_parser(
        "runs", help="list, show, compare and archive training runs",
        description="Training runs are recorded in tfruns's format under runs/ (one folder per run, "
                    "named by its UTC start time); R's tfruns::ls_runs() reads the same folders.")
    sub = parser.add_subparsers(dest="runs_command", metavar="COMMAND")
    sub.required = True

    ls = sub.add_parser("ls", help="a table of runs: evaluation, flags, steps, duration, status")
    _add_runs_dir(ls)
    ls.add_argument("--filter", action="append", default=[], metavar="COL=VALUE",
                    help="keep runs whose column equals VALUE; COL may omit the flag_/eval_/metric_ prefix "
                         "(repeatable), e.g. --filter optimizer.name=adam --filter status=completed")
    ls.add_argument("--sort", default="run_dir", metavar="COL",
                    help="column to sort by, largest first (default: run_dir, i.e. newest first)")
    ls.add_argument("--ascending", action="store_true", help="sort smallest (oldest) first")
    ls.add_argument("--latest", type=int, metavar="N", help="only the N latest runs")
    ls.add_argument("--all-flags", action="store_true", help="show every flag, not only those that differ")
    ls.add_argument("--check", action="store_true",
                    help="also check every run against tfruns's format rules; exit 1 on a violation")
    ls.add_argument("--json", action="store_true", help="print the rows as JSON (every column)")

    show = sub.add_parser("show", help="a summary of one run; --html writes a self-contained report")
    show.add_argument("run", nargs="?", default="latest", metavar="RUN", help="default: latest")
    _add_runs_dir(show)
    show.add_argument("--html", metavar="OUT", help="write an HTML report (charts, flags, evaluation, model, "
                                                      "output, error) to OUT")
    show.add_argument("--json", action="store_true", help="print everything as JSON")

    compare = sub.add_parser("compare", help="flags that differ, evaluation side by side, overlaid curves")
    compare.add_argument("runs", nargs="*", metavar="RUN", help="two runs (default: the two latest)")
    _add_runs_dir(compare)
    compare.add_argument("--html", metavar="OUT", help="write an HTML comparison to OUT")

    clean = sub.add_parser("clean", help="move runs to <runs-dir>/archive/ (tfruns's clean_runs)")
    clean.add_argument("runs", nargs="*", metavar="RUN", help="runs to archive (default: every run)")
    _add_runs_dir(clean)
    clean.add_argument("--yes", "-y", action="store_true", help="archive every run without asking")

    parser.set_defaults(func=run)
    return parser


# --------------------------------------------------------------------------- table
def _fmt(value: Any) -> str:
    from tpuestimator.runs.report import format_value

    return format_value(value)


def _columns_that_differ(rows: Sequence[dict], prefix: str, everything: bool) -> list[str]:
    names: list[str] = []
    for row in rows:
        names += [k for k in row if k.startswith(prefix) and k not in names]
    if everything or len(rows) < 2:
        return names if everything else []
    return [n for n in names if len({json.dumps(r.get(n), default=str) for r in rows}) > 1]


def format_table(rows: Sequence[dict], *, all_flags: bool = False) -> str:
    """The ``runs ls`` table: run, eval_*, flags that differ, steps, duration, status."""
    from tpuestimator.runs.report import format_duration

    evals: list[str] = []
    for row in rows:
        evals += [k for k in row if k.startswith("eval_") and k not in evals]
    flags = _columns_that_differ(rows, "flag_", all_flags)
    header = ["run"] + evals + flags + ["steps", "duration", "status"]
    lines = []
    for row in rows:
        name = str(row["run_dir"]).replace("\\", "/").rsplit("/", 1)[-1]
        steps = row.get("global_step") or row.get("steps_completed")
        steps_text = "-" if steps is None else str(steps)
        planned = row.get("max_steps") if row.get("max_steps") is not None else row.get("steps")
        if planned is not None:
            steps_text += f"/{planned}"
        start, end = row.get("start"), row.get("end")
        duration = format_duration(end - start) if isinstance(start, float) and isinstance(end, float) else "-"
        lines.append([name] + [_fmt(row.get(c)) for c in evals + flags] + [steps_text, duration, row.get("status", "-")])
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(header)]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip()]
    for line in lines:
        out.append("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip())
    return "\n".join(out)


# --------------------------------------------------------------------------- commands
def _ls(args) -> int:
    from tpuestimator.runs.query import ls_runs, parse_filters
    from tpuestimator.runs.validate import check_run_dir

    try:
        filters = parse_filters(args.filter)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rows = ls_runs(args.runs_dir, latest_n=args.latest, order=args.sort, decreasing=not args.ascending,
                   filter=filters or None)
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
    elif not rows:
        print(f"No runs in {args.runs_dir}/" + (" match the filter." if filters else "."))
    else:
        print(format_table(rows, all_flags=args.all_flags))
    if not args.check:
        return 0
    bad = 0
    for row in rows:
        problems = check_run_dir(row["run_dir"])
        if problems:
            bad += 1
            print(f"\n{row['run_dir']}: {len(problems)} format violation(s)")
            for p in problems:
                print(f"  - {p}")
    print(f"\nChecked {len(rows)} run(s): {'all valid' if not bad else f'{bad} invalid'}.")
    return 1 if bad else 0


def _show(args) -> int:
    from tpuestimator.runs.reading import run_info
    from tpuestimator.runs.report import format_run_text, write_run_report

    info = run_info(args.run, args.runs_dir)
    if args.json:
        print(json.dumps({k: v for k, v in info.items() if k != "source"}, indent=2, default=str))
    else:
        print(format_run_text(info))
    if args.html:
        out = write_run_report(info["run_dir"], args.html, args.runs_dir)
        print(f"Report written to {out}")
    return 0


def _compare(args) -> int:
    import tpuestimator.runs.naming as naming
    from tpuestimator.runs.reading import run_info
    from tpuestimator.runs.report import format_compare_text, write_compare_report

    names = list(args.runs)
    if len(names) > 2:
        print(f"error: compare takes two runs, got {len(names)}: {' '.join(names)}", file=sys.stderr)
        return 2
    if len(names) < 2:
        latest = [d.name for d in naming.list_run_dirs(args.runs_dir)][::-1]
        latest = [n for n in latest if n not in names]
        if len(names) + len(latest) < 2:
            print(f"error: compare needs two runs; {args.runs_dir}/ has {len(latest) + len(names)}.",
                  file=sys.stderr)
            return 2
        # With none given: A = the older, B = the newer of the two latest.
        names = names + latest[:2 - len(names)]
        if not args.runs:
            names = names[::-1]
    a, b = run_info(names[0], args.runs_dir), run_info(names[1], args.runs_dir)
    print(format_compare_text(a, b))
    if args.html:
        out = write_compare_report(a["run_dir"], b["run_dir"], args.html, args.runs_dir)
        print(f"Comparison written to {out}")
    return 0


def _clean(args) -> int:
    import tpuestimator.runs.naming as naming
    from tpuestimator.runs.clean import clean_runs

    if not args.runs:
        count = len(naming.list_run_dirs(args.runs_dir))
        if count == 0:
            print(f"No runs in {args.runs_dir}/.")
            return 0
        if not args.yes:
            if not sys.stdin.isatty():
                print(f"error: this would archive all {count} runs of {args.runs_dir}/; pass --yes to confirm, "
                      "or name the runs to archive.", file=sys.stderr)
                return 2
            answer = input(f"Archive all {count} runs of {args.runs_dir}/ to {args.runs_dir}/archive/? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                print("Nothing archived.")
                return 1
    moved = clean_runs(args.runs or None, args.runs_dir)
    for path in moved:
        print(f"Archived {path}")
    print(f"{len(moved)} run(s) moved to {args.runs_dir}/archive/.")
    return 0


def run(args: argparse.Namespace) -> int:
    """Runs the ``runs`` sub-command in `args`; returns the exit code."""
    from tpuestimator.errors import TPUEstimatorError

    handlers = {"ls": _ls, "show": _show, "compare": _compare, "clean": _clean}
    try:
        return handlers[args.runs_command](args)
    except (TPUEstimatorError, FileExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tpuestimator.commands.runs ...`` (the same as ``tpuestimator runs ...``)."""
    parser = argparse.ArgumentParser(prog="tpuestimator")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["runs", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
