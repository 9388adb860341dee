"""What a run's properties say before it trains: the ones a job configuration determines
(steps, batch size, learning rate, optimizer, loss, model, strategy), the environment's
(TensorFlow version, git commit), the ``script`` name, and which values a typed tfruns
property can hold (R reads any other as NA).

Nothing here imports TensorFlow (its version is read from an imported module or the
installed distribution).
"""
from __future__ import annotations

import importlib.metadata
import math
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# tfruns's integer properties, and its one number property.
INTEGER_PROPERTIES = ("steps", "batch_size", "samples", "epochs", "validation_samples")
NUMBER_PROPERTIES = ("learning_rate",)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def typed_property_problem(name: str, value: Any) -> str | None:
    """Why `value` cannot be the typed tfruns property `name` (None when it can, or `name` is untyped)."""
    if name in INTEGER_PROPERTIES and not (is_int(value) or (is_number(value) and float(value).is_integer())):
        return "is not an integer"
    if name in NUMBER_PROPERTIES and not is_number(value):
        return "is not a finite number"
    return None


def tensorflow_version() -> str | None:
    tf = sys.modules.get("tensorflow")
    version = getattr(tf, "__version__", None) if tf is not None else None
    if version:
        return str(version)
    for dist in ("tensorflow", "tensorflow-cpu", "tensorflow-tpu", "tensorflow-macos", "tf-nightly"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def git_commit(cwd: str | None = None) -> str | None:
    """HEAD of the git repository holding `cwd`, or None (not a repo, no commit, no git)."""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd or os.getcwd(), capture_output=True,
                              text=True, timeout=5, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and len(commit) >= 7 else None


def script_name(script: str | os.PathLike | None) -> str:
    """The ``script`` property: the config file's name (``config.yaml`` for a dict config)."""
    name = Path(str(script)).name if script else ""
    return name if name and name not in (".", "..") else "config.yaml"


def _get(mapping: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(mapping, Mapping) or key not in mapping:
            return None
        mapping = mapping[key]
    return mapping


def config_properties(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The tfruns properties that a job configuration determines (typed ones only when valid).

    `config` is the plain dict archived in the run (possibly written by another version, or
    by R), not a validated `JobConfig`: every field is looked up defensively."""
    config = config or {}
    props: dict[str, Any] = {}
    train = _get(config, "train") or {}
    params = _get(config, "params") or {}
    # Not tfruns's ``steps``: tfruns shows ``steps_completed`` (the count of metric rows, one
    # per evaluation) against it, and "3/300" reads as an unfinished run (rule 12). The rows
    # are counted against ``epochs`` (the planned rows, written by the recorder) instead.
    steps = _get(train, "max_steps")
    if not is_int(steps):
        steps = _get(train, "steps")
    if is_int(steps):
        props["max_steps"] = steps
    if is_int(_get(train, "batch_size")):
        props["batch_size"] = train["batch_size"]
    lr = params.get("learning_rate") if isinstance(params, Mapping) else None
    if lr is None:
        lr = _get(params, "optimizer", "learning_rate")
    if is_number(lr):
        props["learning_rate"] = lr
    optimizer = params.get("optimizer") if isinstance(params, Mapping) else None
    if isinstance(optimizer, Mapping):
        optimizer = optimizer.get("name") or optimizer.get("type") or optimizer.get("class_name")
    if isinstance(optimizer, str):
        props["optimizer"] = optimizer
    if isinstance(params, Mapping):
        loss = params.get("loss_function", params.get("loss"))
        if isinstance(loss, str):
            props["loss_function"] = loss
    if isinstance(config.get("model"), str):
        props["model"] = config["model"]
    strategy = _get(config, "run", "strategy")
    if isinstance(strategy, str):
        props["strategy"] = strategy
    return props
