"""A table's training stops early by default (issue 34, item 8): small tables overfit with a
fixed number of steps (infert's `dnn`: 0.774 held-out accuracy at 50 steps, 0.613 at 2,000),
and a data-frame user does not choose steps, so, as with the premade Estimators and early
stopping, the held-out split decides when to stop and which weights are kept.

`apply_table_stopping` fills the config of a job whose `data.manifest` is a table's (written by
`write_table`: from `train_table`, `tune_table`, R's `tpu_train(df)` or `tpuestimator data
write` and a config): `eval.early_stopping` = `TABLE_EARLY_STOPPING` and an evaluation every
max_steps/10 steps or every epoch, whichever is sooner (`evaluation_cadence`). A config that
names `eval.early_stopping` wins: null turns it off, and a partial rule (``patience: 10``)
keeps the table defaults for the keys it leaves out. Nothing here imports TensorFlow (the
config loader calls it).
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

# Patience 5 of 10 evaluations: a run stops once the held-out loss has not improved for half
# of its planned evaluations; the best evaluation's weights are the ones exported.
TABLE_EARLY_STOPPING = {"metric": "loss", "mode": "min", "patience": 5, "restore_best": True}
RULE_FIELDS = ("metric", "mode", "patience", "min_delta", "restore_best")  # eval.early_stopping's
EVALUATIONS = 10  # evaluations planned over train.max_steps (every max_steps // 10 steps)


def metric_mode(metric: str) -> str:
    """'min' for a metric that is better lower (loss, error, mae, mse, rmse), else 'max'."""
    lower = ("loss", "error", "mae", "mse", "rmse")
    return "min" if any(word in str(metric) for word in lower) else "max"


def table_manifest(path: str) -> dict | None:
    """The manifest at `path` (a manifest.json or its folder) when it is a table's (one with
    the inferred `feature_columns` and a `label`), else None. A missing or unreadable file is
    not known to be a table (the data layer reports it when the job reads its data)."""
    try:
        if "://" in path:
            import tensorflow as tf  # gfile reads gs:// too

            if tf.io.gfile.isdir(path):
                path = path.rstrip("/") + "/manifest.json"
            with tf.io.gfile.GFile(path, "r") as fh:
                manifest = json.loads(fh.read())
        else:
            if os.path.isdir(path):
                path = os.path.join(path, "manifest.json")
            with open(path, encoding="utf-8") as fh:
                manifest = json.load(fh)
    except Exception:  # noqa: BLE001 - any unreadable manifest: not known to be a table
        return None
    is_table = isinstance(manifest, dict) and "feature_columns" in manifest and bool(manifest.get("label"))
    return manifest if is_table else None


def apply_table_stopping(raw: dict) -> None:
    """Fills `raw` (a config dict, before the schema's defaults) with a table's early stopping,
    in place; a config that is not a table's is left as it is."""
    data = raw.get("data")
    manifest = data.get("manifest") if isinstance(data, dict) else None
    table = table_manifest(manifest) if isinstance(manifest, str) else None
    if table is None:
        return
    section = raw.setdefault("eval", {})
    if section is None:
        section = raw["eval"] = {}
    if not isinstance(section, dict):
        return  # the schema names the bad section
    if "early_stopping" not in section:
        section["early_stopping"] = dict(TABLE_EARLY_STOPPING)
    rule = section["early_stopping"]
    if rule is False:
        section["early_stopping"] = None  # `--set eval.early_stopping=false` reads as off
    if not isinstance(rule, dict):
        return
    metric = rule.get("metric", TABLE_EARLY_STOPPING["metric"])
    section["early_stopping"] = {**TABLE_EARLY_STOPPING, "mode": metric_mode(metric), **rule}
    if section.get("every_n_steps") is None:
        train = raw.get("train") if isinstance(raw.get("train"), dict) else {}
        steps = train.get("max_steps") or train.get("steps")
        if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
            from tpuestimator.config import DEFAULTS

            rows = ((table.get("splits") or {}).get("train") or {}).get("count")
            batch = train.get("batch_size") or DEFAULTS["train"]["batch_size"]
            epoch = -(-int(rows) // int(batch)) if isinstance(rows, int) and isinstance(batch, int) else None
            every, loop = evaluation_cadence(steps, train.get("iterations_per_loop"), epoch)
            section["every_n_steps"] = every
            if loop is not None:
                raw.setdefault("train", {})["iterations_per_loop"] = loop


def evaluation_cadence(steps: int, iterations_per_loop: Any, epoch_steps: int | None = None) -> tuple[int, int | None]:
    """(eval.every_n_steps, train.iterations_per_loop to set or None): an evaluation every
    `steps / EVALUATIONS` steps, or every epoch (`epoch_steps`) when that is sooner: small
    tables overfit within a few epochs (infert's `dnn`, 198 training rows: the held-out loss
    is lowest after 25 steps, 4 epochs). Evaluations happen at loop boundaries: with the
    default loop (100 steps) the cadence is rounded down to a divisor of 100 (1, 2, 4, 5, 10,
    20, 25, 50) or a multiple of it, the loop shortened to match; a loop the config sets
    rounds the cadence to its multiples."""
    from tpuestimator.config import DEFAULTS

    every = max(1, steps // EVALUATIONS)
    if epoch_steps:
        every = max(1, min(every, epoch_steps))
    if isinstance(iterations_per_loop, int) and not isinstance(iterations_per_loop, bool) and iterations_per_loop > 0:
        return max(iterations_per_loop, every // iterations_per_loop * iterations_per_loop), None
    default_loop = DEFAULTS["train"]["iterations_per_loop"]
    if every >= default_loop:
        return every // default_loop * default_loop, None
    every = max(d for d in range(1, every + 1) if default_loop % d == 0)
    return every, every


def early_stopping_config(value: Any, *, field: str = "early_stopping") -> dict:
    """The config sections for `train_table(early_stopping=)` / `tune_table(early_stopping=)`:
    True (the table default) adds nothing, False or None turns it off, a mapping (``{"patience":
    10}``, ``{"metric": "accuracy"}``) is the rule, the defaults filling the keys it leaves out.

    Raises:
      ConfigError: any other value, naming `field`.
    """
    from tpuestimator.errors import ConfigError

    if value is True:
        return {}
    if value is False or value is None:
        return {"eval": {"early_stopping": None}}
    unknown = sorted(set(value) - set(RULE_FIELDS)) if isinstance(value, Mapping) else []
    if isinstance(value, Mapping) and not unknown:
        # complete here: a config mapped before its manifest is written (flags) is validated as it is
        metric = value.get("metric", TABLE_EARLY_STOPPING["metric"])
        return {"eval": {"early_stopping": {**TABLE_EARLY_STOPPING, "mode": metric_mode(metric), **dict(value)}}}
    raise ConfigError(field, value, "True (stop on the held-out loss, patience 5), False (train max_steps) or "
                      f"the rule's fields ({', '.join(RULE_FIELDS)}), e.g. {{'patience': 10}} or {{'metric': 'accuracy'}}"
                      + (f"; {', '.join(unknown)} is none of them" if unknown else ""))
