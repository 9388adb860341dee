"""``tpuestimator tune CONFIG --grid KEY=V1,V2 [--grid ...] [--sample F]``: one run per combination.

Each combination of the grid values is trained as a separate run with a new model dir of its
own (tfruns's ``tuning_run()``); the runs are then listed best first by the final evaluation loss.
SIGTERM/SIGINT stop it at a checkpoint of the current combination (exit 143/130); the same
command again continues with the combinations not finished (`tpuestimator.jobs.tune`).
"""
from __future__ import annotations

import sys


def parse_grid(items: list[str]) -> dict[str, list[str]]:
    """``["params.learning_rate=1e-3,3e-3"]`` -> ``{"params.learning_rate": ["1e-3", "3e-3"]}``."""
    grid: dict[str, list[str]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        parts = [v.strip() for v in values.split(",")] if sep else []
        if not key or not parts or any(not v for v in parts):
            raise ValueError(f"--grid {item!r} is invalid. Expected: KEY=V1,V2,... e.g. "
                             "--grid params.learning_rate=1e-3,3e-3")
        if key in grid:
            raise ValueError(f"--grid names {key} twice; give all its values in one --grid {key}=V1,V2.")
        grid[key] = parts
    return grid


def register(sub) -> None:
    p = sub.add_parser("tune", help="train one run per combination of flag values (tfruns's tuning_run)",
                       description="Train CONFIG once per combination of the --grid values, each a separate run "
                                   "with its own new model dir; then list the runs, best first.")
    p.add_argument("config", metavar="CONFIG", help="YAML or JSON config file")
    p.add_argument("--grid", action="append", default=[], required=True, metavar="KEY=V1,V2",
                   help="a config field and its values, e.g. --grid params.learning_rate=1e-3,3e-3 (repeatable)")
    p.add_argument("--sample", type=float, metavar="F", help="train only a random fraction F of the combinations")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config field in every run (repeatable)")
    p.add_argument("--runs-dir", help="where run records go (default: run.runs_dir, else runs/)")
    p.add_argument("--no-export", action="store_true", help="skip the exporters")
    p.add_argument("--sort", default="eval_loss", metavar="COL",
                   help="column to list the runs by, smallest first (default: %(default)s)")
    p.set_defaults(func=run)


def run(args) -> int:
    from tpuestimator.commands.runs import format_table
    from tpuestimator.config import check_field, load_config
    from tpuestimator.jobs.tune import flag_grid, read_tuning_state, sample_grid, tuning_run, tuning_state_path
    from tpuestimator.models import resolve_model_fn
    from tpuestimator.runs.query import ls_runs

    try:
        grid = parse_grid(args.grid)
        for key in grid:  # a field the config does not have, before TensorFlow starts
            check_field(key, origin="--grid")
        sample_grid(flag_grid(grid), args.sample)  # fails on a bad --sample before TensorFlow starts
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "verbose", 0) < 2:  # many jobs in one process: no retracing walls
        from tpuestimator.system.console import quiet_tensorflow

        quiet_tensorflow()
    cfg = load_config(args.config, args.overrides)
    # a model function that cannot be imported fails before any trial; resolved once and passed
    # to every trial, unless the grid chooses the model itself
    model_fn = resolve_model_fn(cfg.model)
    runs_dir = args.runs_dir or cfg.run.runs_dir or "runs"

    attempted = []

    def on_run(i: int, n: int, combo: dict) -> None:
        attempted.append(i)
        print(f"tuning run {i}/{n}: " + ", ".join(f"{k}={v}" for k, v in combo.items()), flush=True)

    kept = read_tuning_state(tuning_state_path(runs_dir, args.config, grid, args.sample, args.overrides))
    if kept is not None:
        print(f"continuing the tuning {kept['stamp']}: {len(kept['finished'])} of {len(kept['combos'])} "
              "combination(s) finished", flush=True)
    results = tuning_run(args.config, grid, sample=args.sample, overrides=args.overrides, runs_dir=runs_dir,
                         export=not args.no_export, on_run=on_run, handle_signals=True,
                         model_fn=None if "model" in grid else model_fn)
    # the tuning's runs: this call's, and a continued tuning's earlier ones (same `tuning_run` stamp)
    names = {str(r.run_dir) for r in results if r.run_dir}
    rows = ls_runs(runs_dir, order=args.sort, decreasing=False)
    stamps = {r.get("tuning_run") for r in rows if r["run_dir"] in names} - {None}
    rows = [r for r in rows if r["run_dir"] in names or r.get("tuning_run") in stamps]
    print(f"\n{len(results)} run(s) trained in {runs_dir}/, best first by {args.sort}:")
    print(format_table(rows))
    if len(results) < len(attempted):
        print(f"error: {len(attempted) - len(results)} of {len(attempted)} tuning run(s) failed; see their runs "
              "(status failed) for the error.", file=sys.stderr)
        return 1
    return 0
