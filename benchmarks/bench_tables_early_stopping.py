"""Table training's default early stopping (issue 34, item 8), before and after: on R's `infert`
(label `case`, 248 rows), `CO2` (label `uptake`, a regression, 84 rows) and a 50,000-row
synthetic mixed table (`tables_common.make_mixed_table`), with `dnn` and `linear`.

"before" is the old default: `train.max_steps` 1000 and one evaluation at the end
(`eval.early_stopping: null`); "after" is the table default (an evaluation every max_steps/10
steps, patience 5 on the held-out loss, the best evaluation's weights restored and exported).
"after-reread" (`--modes`, not run by default) is "after" with the held-out set read and decoded
from its files at every evaluation, as before evaluation inputs were kept in memory
(`data.pipeline.IN_MEMORY_EVAL_BYTES` set to 0 for its training): the same steps and figures,
only the CPU seconds differ.
"after-write-best" (`--modes`, not run by default) is "after" with the best evaluation's weights
written anew at each improving evaluation, as before they were hard-linked from the checkpoint
the evaluation follows (`core.best_weights.keep_best_weights`): again the same steps and figures.
Each side trains on the same rows with the same 20% held out (the split is made here and passed
as the eval table, so the held-out rows are known); the held-out accuracy / RMSE is computed
here with numpy from the EXPORT's predictions on those rows, and the steps trained and the CPU
seconds of the training (user + system, all threads: `resource.getrusage`) are reported.

    nice -n 10 .venv/bin/python benchmarks/bench_tables_early_stopping.py [--tables infert,co2,mixed50k]
        [--models dnn,linear] [--modes before,after] [--max-steps 1000] [--out /tmp/bench_es]

Prints a markdown table and writes `<out>/tables_early_stopping.json`.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.setup_path()

DATA = Path(__file__).resolve().parent / "data"
MODES = {"before": {"eval": {"early_stopping": None}}, "after": {}, "after-reread": {}, "after-write-best": {}}


def load(name: str):
    import pandas as pd

    if name == "infert":
        return pd.read_csv(DATA / "infert.csv"), "case"
    if name == "co2":
        return pd.read_csv(DATA / "CO2.csv"), "uptake"
    if name == "mixed50k":
        from tables_common import LABEL, make_mixed_table

        return make_mixed_table(50_000, seed=0), LABEL
    raise SystemExit(f"unknown table {name!r}: infert, co2 or mixed50k")


def held_out(frame, label: str, seed: int = 0):
    """80/20 rows (stratified by class for a classification label), as the table writer splits."""
    rng = np.random.default_rng(seed)
    is_class = frame[label].nunique() <= 20
    groups = [np.flatnonzero(frame[label].to_numpy() == v) for v in np.unique(frame[label])] if is_class else \
        [np.arange(len(frame))]
    eval_rows = np.concatenate([rng.permutation(g)[: max(1, round(0.2 * len(g)))] for g in groups])
    mask = np.zeros(len(frame), bool)
    mask[eval_rows] = True
    return frame[~mask].reset_index(drop=True), frame[mask].reset_index(drop=True), is_class


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_one(table: str, model: str, mode: str, out: str, max_steps: int = 1000) -> dict:
    from tpuestimator.core import best_weights
    from tpuestimator.data import pipeline
    from tpuestimator.tables import predict_table, train_table

    frame, label = load(table)
    train, evaluation, is_class = held_out(frame, label)
    task = "classification" if is_class else "regression"
    folder = os.path.join(out, f"{table}-{model}-{mode}")
    in_memory_bytes, link = pipeline.IN_MEMORY_EVAL_BYTES, best_weights._link_saved_checkpoint
    if mode == "after-reread":
        pipeline.IN_MEMORY_EVAL_BYTES = 0
    if mode == "after-write-best":
        best_weights._link_saved_checkpoint = lambda *args: False
    try:
        start = cpu_seconds()
        result = train_table(train, label=label, out_dir=folder, model=model, task=task, split=evaluation,
                             config={**MODES[mode], "train": {"max_steps": max_steps}}, record=False)
        cpu = cpu_seconds() - start
    finally:
        pipeline.IN_MEMORY_EVAL_BYTES, best_weights._link_saved_checkpoint = in_memory_bytes, link
    predicted = predict_table(result.export_dir, evaluation.drop(columns=[label]))
    truth = evaluation[label].to_numpy()
    row = {"table": table, "model": model, "mode": mode, "rows": len(frame), "steps": result.global_step,
           "exported_step": int(os.path.basename(result.export_dir)), "stopped_early": result.stopped_early,
           "cpu_s": round(cpu, 1)}
    if is_class:
        classes = np.asarray(predicted["class"]).astype(str)
        row["accuracy"] = round(float(np.mean(classes == truth.astype(str))), 4)
    else:
        row["rmse"] = round(float(np.sqrt(np.mean((predicted["prediction"] - truth) ** 2))), 4)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default="infert,co2,mixed50k")
    parser.add_argument("--models", default="dnn,linear")
    parser.add_argument("--modes", default="before,after", help="of before, after, after-reread, after-write-best")
    parser.add_argument("--max-steps", type=int, default=1000, help="train.max_steps of both sides")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    out = args.out or tempfile.mkdtemp(prefix="bench_es_")
    rows = []
    for table in args.tables.split(","):
        for model in args.models.split(","):
            for mode in args.modes.split(","):
                row = run_one(table, model, mode, out, args.max_steps)
                print(json.dumps(row), flush=True)
                rows.append(row)
    with open(os.path.join(out, "tables_early_stopping.json"), "w") as fh:
        json.dump(rows, fh, indent=1)
    print("| table | model | mode | steps trained | exported step | held-out accuracy / RMSE | CPU s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        figure = f"{r['accuracy']:.3f}" if "accuracy" in r else f"{r['rmse']:.2f} (RMSE)"
        print(f"| {r['table']} | {r['model']} | {r['mode']} | {r['steps']} | {r['exported_step']} | {figure} "
              f"| {r['cpu_s']} |")


if __name__ == "__main__":
    main()
