"""A table's training stops early by default (issue 34, item 8): small tables overfit with a
fixed number of steps (infert's `dnn`: 0.774 held-out accuracy at 50 steps, 0.613 at 2,000),
and a data-frame user does not choose steps, so, as with the premade Estimators and early
stopping, the held-out split decides when to stop and which weights are kept.

`tpuestimator.config.apply_table_stopping` (in the config layer: the loader calls it) fills
the config of a job whose `data.manifest` is a table's (written by `write_table`: from
`train_table`, `tune_table`, R's `tpu_train(df)` or `tpuestimator data write` and a config):
`eval.early_stopping` = `TABLE_EARLY_STOPPING` and an evaluation every max_steps/10 steps or
every epoch, whichever is sooner (`evaluation_cadence`). A config that names
`eval.early_stopping` wins: null turns it off, and a partial rule (``patience: 10``) keeps the
table defaults for the keys it leaves out. `early_stopping_config` is what
`train_table(early_stopping=)` and `tune_table(early_stopping=)` add to a table's config.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tpuestimator.config import (  # noqa: F401 - re-exported: the table defaults live with the loader
    EVALUATIONS,
    RULE_FIELDS,
    TABLE_EARLY_STOPPING,
    apply_table_stopping,
    evaluation_cadence,
    metric_mode,
    table_manifest,
)


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
