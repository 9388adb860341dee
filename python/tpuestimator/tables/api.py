"""Tables from Python and R in one call each: `train_table` (write the table, train a canned
model, export it) and `predict_table` (a data frame through an export's raw-features
signature). R's `tpu_train(df, label =)` and `predict(run, newdata =)` call these.
"""
from __future__ import annotations

import copy
import logging
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

MODELS = ("linear", "dnn", "wide_and_deep")


def table_config(manifest: str, *, model: str = "dnn", config: Mapping[str, Any] | None = None) -> dict:
    """A job config (dict) training `model` on the table of `manifest`; `config` sections are
    merged over it (e.g. `{"train": {"max_steps": 500}, "params": {"hidden_units": [16]}}`)."""
    out: dict[str, Any] = {"model": model, "data": {"manifest": os.fspath(manifest)},
                           "train": {"batch_size": 32, "max_steps": 1000}, "eval": {"batch_size": 64}}
    for section, value in (config or {}).items():
        if isinstance(value, Mapping) and isinstance(out.get(section), Mapping):
            out[section] = {**out[section], **copy.deepcopy(dict(value))}
        else:
            out[section] = copy.deepcopy(value)
    return out


def table_flag_overrides(cfg: Mapping[str, Any], model: str, overrides: list[str],
                         flags: Mapping[str, Any]) -> list[str]:
    """``key=value`` overrides for `flags` on the table config `cfg` (with `overrides` applied),
    mapped without validating (`config.flag_settings`): the job validates its config once, with them.

    The canned models read parameters the table config leaves out (`learning_rate`,
    `hidden_units`, ...; `models.params.PARAM_DEFAULTS`), so their short names are looked up
    as if the config held the defaults: ``learning_rate`` sets ``params.learning_rate`` as it
    does for a config that names it.
    """
    from tpuestimator.config import flag_settings
    from tpuestimator.models.params import PARAM_DEFAULTS

    return list(flag_settings(cfg, overrides, flags, params_defaults=PARAM_DEFAULTS.get(model, {})))


def default_table_dir(label: str, model: str, run_dir: str | os.PathLike | None = None) -> str:
    """Where a table model trains when the caller names no folder: ``models/table-<label>-<model>``
    (one per label and canned model, so two models on one label do not meet), or, in a run folder
    made by tfruns's ``training_run()``, ``<runs folder>/.models/<run>`` (`jobs.modeldir.default_model_dir`:
    a folder tfruns does not copy, one per run). R's ``tpu_train(formula, data)`` asks here."""
    from tpuestimator.jobs.modeldir import default_model_dir

    return default_model_dir(None, run_dir) or os.path.join("models", f"table-{label}-{model}")


def train_table(source: Any, *, label: str, out_dir: str | os.PathLike, model: str = "dnn",
                task: str | None = None, split: Any = 0.2, seed: int = 0,
                feature_columns: Mapping[str, Any] | None = None, missing: str | Mapping[str, str] | None = None,
                config: Mapping[str, Any] | None = None, runs_dir: str | None = None,
                model_dir: str | None = None, flags: Mapping[str, Any] | None = None,
                early_stopping: bool | Mapping[str, Any] = True, **job_kwargs):
    """Writes `source` as a table under `out_dir/data`, trains `model` on it into `out_dir/model`
    (evaluating on the held-out split, stopping early on it, exporting at the end) and returns
    the `JobResult`.

    The model dir records the table's fingerprint (`TABLE_FILE`): a checkpoint trained on other
    rows, columns or split is never continued silently (`check_table_model_dir`).

    Args:
      source: a pandas DataFrame, a `.csv` / `.parquet` path or a dict of columns.
      label, task, split, seed, feature_columns, missing: as `write_table` (`split`: the eval
        fraction, strictly between 0 and 1, or an eval table).
      model: `linear`, `dnn` or `wide_and_deep` (or any model name a config takes).
      config: config sections merged over the defaults (`table_config`).
      runs_dir: where the run record goes, as for every job: default the config's
        `run.runs_dir`, else ``runs`` of the working folder (where `ls_runs` and tfruns look).
      model_dir: default `out_dir/model`.
      flags: a run's flags (tfruns's FLAGS from R) applied after the overrides, named as
        `tpuestimator.config_flags` maps them; see `table_flag_overrides`.
      early_stopping: True (default): an evaluation on the held-out split every
        `train.max_steps / 10` steps or every epoch, whichever is sooner; training stops when the held-out loss has not improved
        for 5 of them, and the best evaluation's weights are the ones evaluated and exported
        (`tables.stopping`); False: train `max_steps`, export the last weights; a dict sets
        the rule's fields (``{"patience": 10}``, ``{"metric": "accuracy"}``), the defaults
        filling the others. A config's `eval.early_stopping` is overridden by it unless True.
      job_kwargs: passed to `tpuestimator.jobs.job.run_job` (overrides, progress, hooks, ...).

    Raises:
      ConfigError: a flag that names no configuration field, or a bad `split` (before anything is written).
      ModelDirConflictError: the model dir holds a checkpoint of another table (before anything is written).
    """
    from tpuestimator.jobs.job import run_job
    from tpuestimator.tables.frames import read_table
    from tpuestimator.tables.stopping import early_stopping_config
    from tpuestimator.tables.write import check_split, is_table, write_table

    check_split(split)
    config = with_early_stopping(config, early_stopping_config(early_stopping))
    out_dir = os.path.abspath(os.fspath(out_dir))
    model_dir = os.path.abspath(os.fspath(model_dir)) if model_dir else os.path.join(out_dir, "model")
    if flags:
        # Mapped against the config the training will use (its manifest is written below), so
        # an unknown flag stops the call before the table is written.
        planned = table_config(os.path.join(out_dir, "data", "manifest.json"), model=model, config=config)
        overrides = list(job_kwargs.get("overrides", ()))
        job_kwargs["overrides"] = overrides + table_flag_overrides(planned, model, overrides, flags)
    frame, _ = read_table(source)
    eval_frame = read_table(split)[0] if is_table(split) else None
    fingerprint = table_fingerprint(frame, eval_frame, label=label, task=task, split=None if is_table(split) else
                                    split, seed=seed, feature_columns=feature_columns, missing=missing)
    check_table_model_dir(model_dir, fingerprint, resume=bool(job_kwargs.get("resume", False)))
    manifest = write_table(frame, os.path.join(out_dir, "data"), label=label, task=task,
                           split=split if eval_frame is None else eval_frame, seed=seed,
                           feature_columns=feature_columns, missing=missing, overwrite=True)
    from tpuestimator.system.io import atomic_write_json

    os.makedirs(model_dir, exist_ok=True)
    atomic_write_json(os.path.join(model_dir, TABLE_FILE), {"fingerprint": fingerprint, "manifest": manifest["path"]})
    cfg = table_config(manifest["path"], model=model, config=config)
    # The records were written just above from the frame's checked columns (labels coded from
    # the train and eval rows together): the preflight's read of them would find nothing, and
    # cost ~0.2 s, ~9% of a small table's training. (A config's own `data.assertions`, set by
    # `config`, overrides or flags, are still checked on the first records: `preflight.check_job`.)
    job_kwargs.setdefault("scan_data", False)
    return run_job(cfg, model_dir=model_dir, runs_dir=runs_dir, **job_kwargs)


def with_early_stopping(config: Mapping[str, Any] | None, stopping: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """`config` with the `eval` section of `early_stopping_config` merged over its own."""
    if not stopping:
        return config
    out = dict(config or {})
    out["eval"] = {**dict(out.get("eval") or {}), **stopping["eval"]}
    return out


# In a table model's model dir: the fingerprint of the table its checkpoints were trained on.
TABLE_FILE = "table.json"


def table_fingerprint(frame: Any, eval_frame: Any = None, **settings: Any) -> str:
    """A SHA-256 of a table's rows (column names, dtypes, every value; the eval table's too) and of
    the settings that shape its records (`label`, `task`, `split`, `seed`, `feature_columns`,
    `missing`): two tables with the same fingerprint write the same records."""
    import hashlib
    import json

    import pandas as pd

    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    for part in (frame, eval_frame):
        if part is None:
            continue
        digest.update(json.dumps([[c, str(t)] for c, t in part.dtypes.items()]).encode())
        digest.update(pd.util.hash_pandas_object(part, index=False).to_numpy().tobytes())
    return digest.hexdigest()


def check_table_model_dir(model_dir: str, fingerprint: str, *, resume: bool = False) -> None:
    """Refuses to continue a model dir's checkpoint trained on another table (other rows, columns
    or split), as a changed setting is refused (`tpuestimator.jobs.modeldir`): before anything is
    written. Nothing to check without a checkpoint, or with `resume`.

    Raises:
      ModelDirConflictError: naming the model dir, its step and the choices (resume, a new model dir).
    """
    import json

    from tpuestimator.jobs.modeldir import ModelDirConflictError, checkpoint_step, ways_out

    step = checkpoint_step(model_dir)
    if step is None or resume:
        return
    try:
        with open(os.path.join(model_dir, TABLE_FILE), encoding="utf-8") as f:
            recorded = json.load(f).get("fingerprint")
    except (OSError, ValueError, AttributeError):
        recorded = None
    if recorded == fingerprint:
        return
    what = ("was trained on another table (other rows, columns or split)" if recorded else
            f"has no {TABLE_FILE} saying which table trained it")
    raise ModelDirConflictError(
        f"model dir {model_dir} holds a checkpoint (step {step}) that {what}; continuing it would report that "
        f"training's model as this table's. {ways_out(model_dir)}",
        model_dir=model_dir, step=step, differences={"table": (recorded, fingerprint)})


def predict_table(export_dir: str | os.PathLike, frame: Any, *, batch_size: int = 1024,
                  chunk_rows: int | None = None) -> dict[str, np.ndarray]:
    """Predictions for a data frame (or CSV / Parquet path, read in chunks of `chunk_rows`) from
    a table model's export, in memory (`tables.predict.predict_table_to_file` writes a file
    chunk by chunk instead).

    Returns:
      columns: `prediction` (regression), or `class`, `class_id` and `prob_<class>` per class.
      Unseen categories go to the out-of-vocabulary bucket.

    Raises:
      ConfigError: the export is not a table model's. DataError: see `tables.predict.table_inputs`.
    """
    from tpuestimator.tables.predict import CHUNK_ROWS, iter_table_predictions

    out: dict[str, list] = {}
    chunk_rows = CHUNK_ROWS if chunk_rows is None else chunk_rows  # 0 is refused, not the default
    for columns in iter_table_predictions(export_dir, frame, chunk_rows=chunk_rows, batch_size=batch_size):
        for key, values in columns.items():
            out.setdefault(key, []).append(values)
    return {k: np.concatenate(v) for k, v in out.items()}
