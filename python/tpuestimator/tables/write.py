"""Writing a table as TFRecords: `write_table(source, out_dir, label=...)`.

The label column is checked and its task inferred (class ids or a number to predict), the
rows split into train and eval (stratified by class for classification), every feature
column's spec inferred from the TRAINING rows only (`feature_columns.infer_column`: statistics,
vocabularies) and checked (no all-missing column; missing values only under a policy), then
the shards and the manifest (with `feature_columns` and `task`) are written into a temporary
folder renamed into place: every error comes before anything is written, and nothing is
ever half-written.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from tpuestimator.data import encode
from tpuestimator.data.manifest import build_manifest, split_info
from tpuestimator.data.writers import check_output, split_indices, write_shard, write_staged
from tpuestimator.errors import ConfigError, DataError
from tpuestimator.models.feature_columns import (
    apply_overrides,
    check_input_names,
    check_missing,
    column_spec_text,
    drop_column_text,
    infer_column,
    missing_mask,
    record_columns,
)
from tpuestimator.tables.frames import column_values, label_column, read_table

log = logging.getLogger(__name__)


def infer_feature_columns(source: Any, *, label: str, task: str | None = None, split: Any = 0.2, seed: int = 0,
                          feature_columns: Mapping[str, Any] | None = None,
                          missing: str | Mapping[str, str] | None = None) -> dict:
    """The plan of `write_table` without writing: {"task", "vocabulary", "feature_columns", "train", "eval"}
    (`train`/`eval`: row indices). See `write_table` for the arguments."""
    check_split(split)
    frame, name = read_table(source)
    n_train = len(frame)
    if is_table(split):
        frame = with_eval_rows(frame, name, split)
    labels, vocab, task = label_column(frame, label, name, task)
    if is_table(split):
        train_idx, eval_idx = np.arange(n_train), np.arange(n_train, len(frame))
    else:
        train_idx, eval_idx = split_indices(len(frame), float(split), seed,
                                            labels if task == "classification" else None)
    if len(train_idx) == 0:
        raise DataError(f"{name}: {len(frame)} row(s) leave no training rows with split={split}; add rows or "
                        "lower the eval fraction.")
    overrides = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in (feature_columns or {}).items()}
    unknown = sorted(k for k, v in overrides.items() if k not in frame.columns and
                     not (isinstance(v, Mapping) and v.get("type") == "crossed"))
    if unknown:
        raise ConfigError(f"feature_columns.{unknown[0]}", overrides[unknown[0]],
                          f"a column of the table ({', '.join(c for c in frame.columns if c != label)}) or a "
                          f"{column_spec_text('crossed')}")
    policies = _policies(missing, [c for c in frame.columns if c != label], name)
    inferred: dict[str, dict] = {}
    values_by_column: dict[str, np.ndarray] = {}
    for col in frame.columns:
        if col == label:
            continue
        override = overrides.get(col)
        if override is None and col in overrides:
            continue  # dropped by the user
        values, levels = column_values(frame[col])
        mask = missing_mask(values)
        if mask.all():
            raise DataError(f"{name}: column {col!r} is empty (all {len(values)} values missing). Drop the column "
                            f"({drop_column_text(col)}) or fill it.", feature=col)
        override = override or {}
        inferred[col] = infer_column(col, values[train_idx], categories=levels, kind=override.get("type"),
                                     buckets=override.get("buckets"))
        if col in policies and "missing" not in override:
            policy = policies[col]
            if isinstance(missing, str):  # one policy for all: its counterpart on the other kind of column
                numeric = inferred[col]["type"] in ("numeric", "bucketized")
                policy = ("mean" if policy == "oov" else policy) if numeric else "oov"
            inferred[col]["missing"] = policy
        values_by_column[col] = values
    extra = {k: v for k, v in overrides.items() if v is not None}
    for col, override in extra.items():
        if col in inferred:
            # what inference computed from the data stays unless the user set it
            extra[col] = {k: v for k, v in override.items() if k not in ("type", "buckets") or k == "buckets"
                          and inferred[col]["type"] != "bucketized"}
    columns = apply_overrides(inferred, extra, where="feature_columns")
    check_input_names(list(columns), where=name)
    check_missing(record_columns(columns), values_by_column, where=name)  # every column in one error
    if len(eval_idx) == 0:  # after the columns' own errors, which a larger table would meet too
        held = " (held out per class, rounded)" if task == "classification" else ""
        raise DataError(f"{name}: {len(frame)} row(s) leave no evaluation rows with split={split}{held}; raise "
                        "split, add rows, or give an eval table as split.")
    return {"task": task, "vocabulary": vocab, "feature_columns": columns, "train": train_idx, "eval": eval_idx,
            "labels": labels, "values": values_by_column, "label": label, "name": name,
            "label_stats": label_stats(labels[train_idx]) if task == "regression" else None}


def is_table(value: Any) -> bool:
    """Whether `split` names an eval table (a data frame, a dict of columns or a file path)."""
    return isinstance(value, (str, os.PathLike, Mapping)) or (hasattr(value, "columns") and hasattr(value, "iloc"))


def check_split(split: Any) -> None:
    """Refuses a `split` that is neither an eval fraction strictly between 0 and 1 nor an eval table.

    Raises:
      ConfigError: naming `split`, the value and the fix (before anything is read or written).
    """
    if is_table(split):
        return
    number = isinstance(split, (int, float, np.integer, np.floating)) and not isinstance(split, (bool, np.bool_))
    if not number or not 0.0 < float(split) < 1.0:
        raise ConfigError("split", split, "the fraction of rows held out for evaluation, strictly between 0 and 1 "
                          "(e.g. 0.2), or an eval table (a data frame, or a .csv / .parquet path) with the same "
                          "columns; a model is evaluated on rows it did not train on")


def with_eval_rows(frame, name: str, split: Any):
    """The training rows of `frame` followed by the eval table's (`split`), its columns in the
    training table's order; factor levels are the union (the training table's first).

    Raises:
      DataError: the eval table lacks a column of the training table.
    """
    import pandas as pd

    eval_frame, eval_name = read_table(split)
    missing = [c for c in frame.columns if c not in eval_frame.columns]
    if missing:
        raise DataError(f"split: the eval table ({eval_name}) lacks column(s) {missing} of {name}; give it the "
                        "training table's columns.", feature=missing[0])
    eval_frame = eval_frame[list(frame.columns)]
    for col in frame.columns:
        a, b = frame[col], eval_frame[col]
        if isinstance(a.dtype, pd.CategoricalDtype) and isinstance(b.dtype, pd.CategoricalDtype):
            levels = list(a.cat.categories) + [c for c in b.cat.categories if c not in set(a.cat.categories)]
            frame[col], eval_frame[col] = a.cat.set_categories(levels), b.cat.set_categories(levels)
    return pd.concat([frame, eval_frame], ignore_index=True)


def label_stats(train_labels: np.ndarray) -> dict:
    """{"mean", "std"} of a regression label over the training rows: the canned regressors learn
    the standardized label and answer in the label's units (`models.heads`). A constant label has
    std 1."""
    values = np.asarray(train_labels, np.float64)
    std = float(values.std())
    return {"mean": float(values.mean()), "std": std if std > 0 else 1.0}


def _policies(missing, names, where) -> dict[str, str]:
    if missing is None:
        return {}
    if isinstance(missing, str):
        return {n: missing for n in names}
    unknown = sorted(set(missing) - set(names))
    if unknown:
        raise ConfigError(f"missing.{unknown[0]}", missing[unknown[0]], f"a feature column of {where}: "
                          f"{', '.join(names)}")
    return dict(missing)


def _stored(value, dtype: str):
    if dtype == "float32":
        return float(value)
    if dtype == "int64":
        return int(value)
    return "TRUE" if value is True else ("FALSE" if value is False else str(value))


def _examples(plan: dict, rows: np.ndarray):
    import tensorflow as tf

    columns = record_columns(plan["feature_columns"])
    masks = {c: missing_mask(plan["values"][c]) for c in columns}
    label, labels = plan["label"], plan["labels"]
    for i in rows:
        feature = {}
        for col, spec in columns.items():
            if masks[col][i]:
                continue  # parsed back as the column's missing-value default
            value = _stored(plan["values"][col][i], spec["dtype"])
            if spec["dtype"] == "float32":
                feature[col] = tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
            elif spec["dtype"] == "int64":
                feature[col] = tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
            else:
                feature[col] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
        if plan["task"] == "regression":
            feature[label] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(labels[i])]))
        else:
            feature[label] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(labels[i])]))
        yield tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_table(source: Any, out_dir: str | os.PathLike, *, label: str, task: str | None = None,
                split: Any = 0.2, seed: int = 0, shards: int = 1,
                feature_columns: Mapping[str, Any] | None = None, missing: str | Mapping[str, str] | None = None,
                overwrite: bool = False) -> dict:
    """Writes a table as TFRecord shards plus a manifest.json with its feature columns.

    Args:
      source: a pandas DataFrame, a `.csv` or `.parquet` path, or a dict of columns.
      out_dir: the output folder (must not hold a manifest unless `overwrite`).
      label: the column to predict.
      task: "classification" or "regression"; default inferred (`frames.task_from_label`: factors,
        strings, bools and integers with at most 20 distinct values, at most half as many as rows:
        classification; other numbers: regression), with a log line saying which and why.
      split: the eval fraction, strictly between 0 and 1 (stratified by class for classification),
        or an eval table (a data frame or path with the same columns). seed: the split's seed.
      feature_columns: per-column overrides of the inferred columns (`models.feature_columns`), e.g.
        `{"cyl": {"type": "categorical"}, "cyl_x_gear": {"type": "crossed", "columns": ["cyl", "gear"],
        "buckets": 16}}`; None drops a column.
      missing: a missing-value policy for every feature column ("mean", "zero", "oov") or per column.

    Returns:
      The manifest dict, with "path" set to the manifest file.

    Raises:
      DataError / ConfigError: naming the column, the value and the fix, before anything is written.
    """
    out_dir, shards = check_output(out_dir, shards, overwrite=overwrite)
    plan = infer_feature_columns(source, label=label, task=task, split=split, seed=seed,
                                 feature_columns=feature_columns, missing=missing)

    def write_files(tmp: str) -> dict:
        splits = {}
        for split_name in ("train", "eval"):
            rows = plan[split_name]
            if len(rows) == 0:
                continue
            names = [encode.shard_name(split_name, i, shards) for i in range(shards)]
            for i, shard in enumerate(names):
                write_shard(os.path.join(tmp, shard), _examples(plan, rows[i::shards]))
            stored = [int(plan["labels"][r]) for r in rows] if plan["task"] == "classification" else []
            info = split_info(names, stored, plan["vocabulary"], encode.shard_pattern(split_name, shards))
            info["count"] = int(len(rows))
            splits[split_name] = info
        features = {c: {"dtype": spec["dtype"], "shape": []}
                    for c, spec in record_columns(plan["feature_columns"]).items()}
        manifest = build_manifest(format="features", splits=splits, vocabulary=plan["vocabulary"],
                                  features=features, label=label, source=plan["name"])
        manifest["task"] = plan["task"]
        manifest["feature_columns"] = plan["feature_columns"]
        if plan["label_stats"]:
            manifest["label_stats"] = plan["label_stats"]
        return manifest

    manifest = write_staged(out_dir, write_files)
    log.info("wrote a %s table: %s", plan["task"],
             ", ".join(f"{s}: {v['count']} records" for s, v in manifest["splits"].items()))
    return manifest
