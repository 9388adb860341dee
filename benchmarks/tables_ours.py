"""The tpuestimator side of the tables benchmarks, in one place: writing a table
(`tpuestimator.tables.write_table`), its feature columns, the canned models (`linear`, `dnn`)
trained and evaluated by the Estimator, and the table input pipeline (`data.make_input_fn` on
the table's manifest).

The baselines (TF 2.15 feature columns, Keras FeatureSpace, least squares, logistic regression)
are built from the SAME feature columns tpuestimator inferred and wrote into the manifest
(`baseline_stats`, `feature_space_like`, `split_plan`), so every side trains the same network
on the same features and rows.
"""
from __future__ import annotations

import os

import numpy as np
import tables_common as tc

# Training settings of the quality runs: what a tfestimators user would run on a small table.
LINEAR_STEPS = 2000
LINEAR_BATCH = 32


def describe() -> str:
    return "tpuestimator.tables canned dnn (models.canned.dnn), table input pipeline (data.make_input_fn)"


def describe_linear() -> str:
    return (f"tpuestimator.tables canned linear (models.canned.linear, its default optimizer), "
            f"batch {LINEAR_BATCH}, {LINEAR_STEPS} steps unless --steps")


# ---------------------------------------------------------------------------- writing
def write_table(df, out_dir: str, *, label: str = tc.LABEL, task: str = "classification", split: float = 0.2,
                seed: int = 0, shards: int = 2) -> str:
    """Writes `df` with tpuestimator's table writer; returns the table folder (its manifest inside)."""
    from tpuestimator import tables

    tables.write_table(df, out_dir, label=label, task=task, split=split, seed=seed, shards=shards)
    return out_dir


def section(table_dir: str, **extra) -> dict:
    """The config's `data` section naming the table (what `tpuestimator train` reads)."""
    return {"manifest": os.path.join(table_dir, "manifest.json"), **extra}


def _resolved(table_dir: str):
    from tpuestimator import data

    return data.resolve_section(section(table_dir))


def train_pattern(table_dir: str) -> str:
    return _resolved(table_dir).train


def feature_columns(table_dir: str) -> dict:
    return dict(_resolved(table_dir).feature_columns)


def train_split(df, table_dir: str, *, label: str = tc.LABEL, task: str = "classification", split: float = 0.2,
                seed: int = 0):
    """The training rows of `df` as the writer split them (the same call, nothing written)."""
    return df.iloc[split_plan(df, label=label, task=task, seed=seed, split=split)["train"]]


# ---------------------------------------------------------------------------- baselines' view
def baseline_stats(table_dir: str) -> dict:
    """The TF 2.15 script's feature definitions from tpuestimator's feature columns."""
    columns = feature_columns(table_dir)
    numeric = {k: [c["mean"], float(np.sqrt(c["variance"]))] for k, c in columns.items() if c["type"] == "numeric"}
    categorical = {k: {"vocabulary": c["vocabulary"],
                       "embedding_dim": c.get("embedding_dim") if c.get("encoding") == "embedding" else None}
                   for k, c in columns.items() if c["type"] == "categorical"}
    return {"numeric": numeric, "categorical": categorical, "label": _resolved(table_dir)["label"]}


def feature_space_like(table_dir: str):
    """Keras 3's FeatureSpace with tpuestimator's feature columns (statistics, vocabularies,
    one-hot or integer ids for an embedding), configured with no adapt pass."""
    import keras
    from keras.utils import FeatureSpace

    features = {}
    for name, c in feature_columns(table_dir).items():
        if c["type"] == "numeric":
            features[name] = FeatureSpace.feature(
                preprocessor=keras.layers.Normalization(mean=c["mean"], variance=c["variance"]),
                dtype="float32", output_mode="float")
        else:
            mode = "int" if c.get("encoding") == "embedding" else "one_hot"
            features[name] = FeatureSpace.feature(
                preprocessor=keras.layers.StringLookup(vocabulary=c["vocabulary"], num_oov_indices=1),
                dtype="string", output_mode=mode)
    fs = FeatureSpace(features, output_mode="dict")
    # Every preprocessor is configured from the training split's statistics already (what
    # adapt() would compute); FeatureSpace has no public way to say so.
    fs._is_adapted = True  # noqa: SLF001
    fs.get_inputs()  # builds the encoders eagerly (not inside a tf.data map)
    return fs


# ---------------------------------------------------------------------------- ours
def dnn_estimator(table_dir: str, *, model_dir: str, batch: int, hidden_units, learning_rate: float,
                  steps_per_loop: int):
    """(Estimator, train input_fn) of the canned `dnn` classifier on the table, as
    `tpuestimator train` builds them (model `dnn`, params from the table's manifest)."""
    from tpuestimator import data
    from tpuestimator.core.estimator import Estimator, RunConfig

    sec = section(table_dir, cache=True)
    resolved = data.resolve_section(sec)
    params = {"feature_columns": dict(resolved.feature_columns), "task": "classification",
              "num_classes": int(data.num_classes(sec) or 2), "hidden_units": list(hidden_units),
              "learning_rate": learning_rate, "optimizer": "adam"}
    config = RunConfig(model_dir=model_dir, train_batch_size=batch, iterations_per_loop=steps_per_loop,
                       save_checkpoints_steps=None)
    return Estimator("dnn", config, params=params), data.make_input_fn(sec, "train")


def input_dataset(table_dir: str, batch: int, *, mode: str = "train", cache: bool = False):
    """The table input pipeline (read, parse per batch, the columns' preprocessing) as
    training reads it: `data.make_input_fn` on the table's manifest."""
    from tpuestimator import data

    input_fn = data.make_input_fn(section(table_dir, cache=cache), mode)
    return input_fn({"batch_size": batch, "mode": mode, "input_context": None, "seed": 0, "start_step": 0})


# ---------------------------------------------------------------------------- quality (linear)
def split_plan(frame, *, label: str, task: str, seed: int, split: float = 0.2) -> dict:
    """The table writer's plan for these arguments, nothing written: {"train", "eval" (row
    indices), "feature_columns" (inferred from the training rows), "labels" (class ids or
    numbers)}. `fit_evaluate_linear` writes with the same arguments, so both sides get the
    same rows and columns."""
    from tpuestimator import tables

    plan = tables.infer_feature_columns(frame, label=label, task=task, split=split, seed=seed)
    return {"train": np.asarray(plan["train"]), "eval": np.asarray(plan["eval"]),
            "feature_columns": plan["feature_columns"], "labels": np.asarray(plan["labels"])}


def fit_evaluate_linear(frame, *, label: str, task: str, seed: int, steps: int | None, out_dir: str,
                        split: float = 0.2, l2_regularization: float = 0.0) -> dict:
    """Writes the table (split `seed`), trains the canned `linear` model `steps` steps with its
    default optimizer (and `params.l2_regularization`), evaluates it on the eval rows: {"rmse"}
    or {"accuracy"}, plus the eval metrics as the Estimator reports them. A regressor gets the
    label's training mean and std from the manifest (`params.label_stats`), as `tpuestimator
    train` gives it."""
    from tpuestimator import data
    from tpuestimator.core.estimator import Estimator, RunConfig

    table_dir = write_table(frame, os.path.join(out_dir, "table"), label=label, task=task, split=split, seed=seed,
                            shards=1)
    sec = section(table_dir)
    resolved = data.resolve_section(sec)
    params = {"feature_columns": dict(resolved.feature_columns), "task": task, "l2_regularization": l2_regularization}
    if resolved.label_stats:
        params["label_stats"] = resolved.label_stats
    if task == "classification":
        params["num_classes"] = int(data.num_classes(sec))
    config = RunConfig(model_dir=os.path.join(out_dir, "model"), train_batch_size=LINEAR_BATCH,
                       eval_batch_size=LINEAR_BATCH, iterations_per_loop=100, save_checkpoints_steps=None,
                       seed=seed)
    est = Estimator("linear", config, params=params)
    est.train(data.make_input_fn(sec, "train"), steps=steps or LINEAR_STEPS, save_final_checkpoint=False)
    metrics = {k: float(v) for k, v in est.evaluate(data.make_input_fn(sec, "eval")).items()}
    key = "rmse" if task == "regression" else "accuracy"
    return {key: metrics[key], "eval_metrics": metrics}


def embedding_dims(table_dir: str) -> dict:
    """name -> embedding width of the columns tpuestimator embeds."""
    return {k: int(c["embedding_dim"]) for k, c in feature_columns(table_dir).items()
            if c.get("encoding") == "embedding"}
