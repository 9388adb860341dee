"""Turning Python values into what tfruns's reader accepts (docs/RUN_FORMAT.md).

- Flags are flat scalars: nested mappings are flattened to dotted keys (``optimizer.beta1``),
  lists and tuples are written as their JSON text (``"[64, 32]"``).
- ``None``, NaN and +-Inf never appear in ``flags.json``: such a flag is LEFT OUT, so R's
  ``ls_runs()`` shows ``NA`` for it (its natural "no value"). Writing the string ``"null"``
  instead would turn a numeric flag column (``flag_train.steps``: 100 in one run, None in
  another) into a character column and break sorting and comparing runs by it. The names of
  the flags left out are kept in the run's ``flags_dropped`` property so nothing is lost.
- Evaluation values keep only finite numbers, booleans and strings.
- Property files hold one value as text; booleans as R writes them (``TRUE``/``FALSE``).
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from tpuestimator.system.io import json_safe

# metrics.json keys (docs/RUN_FORMAT.md). tfruns charts every key but ``epoch`` (the x axis)
# and draws ``val_<m>`` beside ``<m>``. Our x axis is the global step of each row, kept
# under ``epoch`` so that tfruns does not chart it; ``step`` is read from older runs only.
X_KEY = "epoch"
STEP_KEY = "step"
X_KEYS = (X_KEY, STEP_KEY)
EVAL_PREFIX = "val_"


def _scalar(value: Any) -> Any:
    """numpy scalars and 0-d arrays become Python scalars; anything else unchanged."""
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 0) == 0:
        try:
            return value.item()
        except (TypeError, ValueError):
            return value
    return value


def _describe_dropped(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else ("Inf" if value > 0 else "-Inf")
    return type(value).__name__


def flatten_flags(params: Mapping[str, Any] | None, prefix: str = "") -> tuple[dict[str, Any], dict[str, str]]:
    """Flattens nested params into tfruns flags.

    Args:
      params: a possibly nested mapping.
      prefix: a dotted prefix for every key.

    Returns:
      (flags, dropped): `flags` maps dotted keys to a bool, int, finite float or str;
      `dropped` maps the dotted keys left out to why (``"None"``, ``"NaN"``, ``"Inf"``).
    """
    flags: dict[str, Any] = {}
    dropped: dict[str, str] = {}
    for key, value in (params or {}).items():
        name = f"{prefix}{key}"
        value = _scalar(value)
        if isinstance(value, Mapping):
            if not value:
                continue
            sub, sub_dropped = flatten_flags(value, prefix=name + ".")
            flags.update(sub)
            dropped.update(sub_dropped)
        elif isinstance(value, (list, tuple, set, frozenset)):
            items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else list(value)
            flags[name] = json.dumps(json_safe(items), default=str, allow_nan=False)
        elif value is None or (isinstance(value, float) and not math.isfinite(value)):
            dropped[name] = _describe_dropped(value)
        elif isinstance(value, (bool, int, float, str)):
            flags[name] = value
        else:
            flags[name] = str(value)
    return flags, dropped


def clean_evaluation(metrics: Mapping[str, Any] | None) -> dict[str, Any]:
    """An evaluation object for ``evaluation.json``: finite numbers, booleans and strings only.

    Nested mappings are flattened like flags; None, NaN, Inf, lists and other values are
    dropped (rule 4: no null in evaluation.json).
    """
    out: dict[str, Any] = {}
    for key, value in (metrics or {}).items():
        value = _scalar(value)
        if isinstance(value, Mapping):
            for sub_key, sub_value in clean_evaluation(value).items():
                out[f"{key}.{sub_key}"] = sub_value
        elif isinstance(value, bool) or isinstance(value, str):
            out[str(key)] = value
        elif isinstance(value, (int, float)) and math.isfinite(value):
            out[str(key)] = value
    return out


def metric_value(value: Any) -> float | None:
    """A metric value for a ``metrics.json`` array: a finite float, or None (NaN, Inf, junk)."""
    value = _scalar(value)
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        value = float(value)
        return value if math.isfinite(value) else None
    return None


def property_text(value: Any) -> str:
    """A property value as the text R writes: TRUE/FALSE for booleans, digits for numbers."""
    value = _scalar(value)
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "NA"
        return repr(value) if not value.is_integer() or abs(value) >= 1e15 else str(int(value))
    if isinstance(value, (list, tuple)):
        return json.dumps(json_safe(list(value)), default=str, allow_nan=False)
    if isinstance(value, Mapping):
        return json.dumps(json_safe(dict(value)), default=str, allow_nan=False)
    return str(value)
