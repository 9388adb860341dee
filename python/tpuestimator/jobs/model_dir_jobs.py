"""Jobs on a trained model dir (or the run folder that points to it): `evaluate_job` (the
latest checkpoint on the eval data or other files) and `export_job` (a SavedModel or a
.tflite file), with `resolve_model_dir` and `load_job_config` (the config the training wrote).

The CLI's `tpuestimator evaluate` / `export` and R's `tpu_evaluate()` / `tpu_export()` call
these (R through `tpuestimator.jobs.job`, which re-exports them).
"""
from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from tpuestimator import data
from tpuestimator.config import JobConfig, load_config
from tpuestimator.core.cluster_task import read_tf_config
from tpuestimator.data.spec import pattern_for
from tpuestimator.errors import ConfigError
from tpuestimator.jobs.from_config import build_estimator, input_fn_for
from tpuestimator.jobs.model_dir_lock import model_dir_lock
from tpuestimator.models.feature_columns import input_name
from tpuestimator.models.params import DataParams
from tpuestimator.serving import litert
from tpuestimator.serving.export_info import EXPORT_META, read_export_info, write_export_info
from tpuestimator.serving.exports import data_serving_inputs, is_export_dir, write_export_metadata
from tpuestimator.spec import Mode

logger = logging.getLogger(__name__)


def resolve_model_dir(path: str) -> str:
    """A model dir, or a run folder whose `model_dir` property points to one."""
    prop = Path(path) / "tfruns.d" / "properties" / "model_dir"
    if prop.is_file():
        return prop.read_text().strip()
    if not (Path(path) / "config.yaml").is_file():
        raise ConfigError("MODEL_DIR", path, "a model dir written by `tpuestimator train` (it holds config.yaml) "
                          "or a run folder")
    return path


# Strategies that need a cluster (TF_CONFIG): a training's, not a follow-up job's on one machine.
CLUSTER_STRATEGIES = ("multi_worker", "parameter_server")


def load_job_config(model_dir: str, overrides: Iterable[str] = ()) -> JobConfig:
    """The config a job wrote into its model dir (``config.yaml``), with `overrides`.

    A follow-up job (evaluate, export) of a model dir trained by a cluster runs on this
    machine: without TF_CONFIG, a recorded `run.strategy` of multi_worker or parameter_server
    becomes `auto` (logged), unless `overrides` set `run.strategy` themselves.
    """
    overrides = [str(o) for o in overrides]
    path = os.path.join(model_dir, "config.yaml")
    cfg = load_config(path, overrides)
    chosen = any(o.split("=", 1)[0].strip() == "run.strategy" for o in overrides)
    if cfg.run.strategy in CLUSTER_STRATEGIES and not chosen and read_tf_config() is None:
        logger.info("%s was trained on a cluster (run.strategy=%s); without TF_CONFIG this job runs on this "
                    "machine's devices (run.strategy=auto; --set run.strategy=... chooses another)",
                    model_dir, cfg.run.strategy)
        cfg = cfg.replace(run={"strategy": "auto"})  # not the file loaded again: only the run section rechecked
    return cfg


def evaluate_job(model_dir: str, *, overrides: Iterable[str] = (), data_pattern: str | None = None) -> dict:
    """Evaluates the latest checkpoint of a trained model dir (or run folder)."""
    model_dir = resolve_model_dir(model_dir)
    # A shared lock: evaluations and exports of one model dir may run together, not while it
    # is being trained (its keep_checkpoint_max would delete the checkpoint being read).
    with model_dir_lock(model_dir, shared=True):
        cfg = load_job_config(model_dir, overrides)
        estimator = build_estimator(cfg, model_dir=model_dir)
        if estimator.latest_checkpoint() is None:
            raise ConfigError("MODEL_DIR", model_dir, "a model dir holding a checkpoint (train first)")
        input_fn = input_fn_for(cfg, "eval", data_pattern)
        # the section the input reads (with --data's files): an error names the file and record read
        with data.translate_errors(input_fn.data_spec, "eval", num_classes=DataParams.from_params(estimator.params).num_classes):
            return estimator.evaluate(input_fn)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExportResult:
    """What `export_model` wrote.

    Attributes:
      path: the .tflite file for format "tflite", else the SavedModel folder.
      saved_model: the SavedModel folder (a .tflite is converted from it).
      tflite: the .tflite's verification report (also in the export's metadata), or None.
      warmup_requests: how many TF Serving warmup requests the export holds (0: none).
    """

    path: str
    saved_model: str
    tflite: dict | None = None
    warmup_requests: int = 0


def export_model(model_dir: str, out: str | None = None, *, format: str = "saved_model",
                 quantize: str | None = None, warmup: int | None = None, representative_batches: int | None = None,
                 overrides: Iterable[str] = ()) -> ExportResult:
    """Exports the latest checkpoint of a model dir (with `eval.early_stopping.restore_best`, a
    table's default, the best evaluation's weights, as the training exported them, `best_weights`)
    as a versioned SavedModel (three signatures,
    `serving.data_serving_inputs`) under `out` (default `MODEL_DIR/export/manual`), and for
    format "tflite" a `.tflite` file beside it, converted and verified by `litert`.

    Args:
      quantize: tflite only: none | dynamic | float16 | int8.
      warmup: TF Serving warmup requests to write (default: the config's `export.warmup`).
      representative_batches: int8 only: training batches to calibrate on (default: the
        config's `export.representative_batches`).
    """
    if format not in ("saved_model", "tflite"):
        raise ConfigError("format", format, "'saved_model' or 'tflite'")
    if quantize is not None and format != "tflite":
        raise ConfigError("quantize", quantize, "only with format 'tflite' (a SavedModel is not quantized)")
    mode = litert.check_quantize(quantize)
    model_dir = resolve_model_dir(model_dir)
    with model_dir_lock(model_dir, shared=True):  # see evaluate_job
        return _export_locked(model_dir, out, format=format, mode=mode, warmup=warmup,
                              representative_batches=representative_batches, overrides=overrides)


def _export_locked(model_dir: str, out: str | None, *, format: str, mode, warmup: int | None,
                   representative_batches: int | None, overrides: Iterable[str]) -> ExportResult:
    cfg = load_job_config(model_dir, overrides)
    columns = data.resolve_section(cfg.data).feature_columns
    refusal = litert.table_refusal(columns) if format == "tflite" else None
    if refusal:  # refused before anything is exported or converted
        raise ConfigError("format", "tflite", f"saved_model for this table model: {refusal}. Export the "
                          "SavedModel (`tpuestimator export MODEL_DIR`) and serve it with TF Serving, `tpuestimator "
                          "predict` or tpuestimator.tables.predict_table, or retrain with that column as a "
                          "categorical column of strings (a vocabulary of strings converts) or without it")
    exp = cfg.export
    warmup = exp.warmup if warmup is None else warmup
    check_count("warmup", warmup, minimum=0)
    batches = exp.representative_batches if representative_batches is None else representative_batches
    check_count("representative_batches", batches, minimum=1)
    records = warmup_records(cfg, warmup)  # before exporting: a bad count leaves nothing behind
    estimator = build_estimator(cfg, model_dir=model_dir)
    if estimator.latest_checkpoint() is None:
        raise ConfigError("MODEL_DIR", model_dir, "a model dir holding a checkpoint (train first)")
    # Building the model needs the feature spec: one probe of the eval (or train) input.
    has_eval = cfg.has_eval_data
    estimator.build(input_fn_for(cfg, "eval" if has_eval else "train"), Mode.EVAL if has_eval else Mode.TRAIN)
    best_weights(cfg, estimator)
    base = out or os.path.join(model_dir, "export", "manual")
    existing = os.path.join(base, str(estimator.global_step))
    if format == "tflite" and is_export_dir(existing):
        path = existing  # this checkpoint's SavedModel is there: each quantization's .tflite goes beside it
    else:
        path = estimator.export_saved_model(base, version=estimator.global_step,
                                            serving_inputs=data_serving_inputs(cfg.data))
        write_export_metadata(path, cfg, estimator)
    requests = write_warmup(path, cfg, warmup, records)
    if format == "saved_model":
        return ExportResult(path=path, saved_model=path, warmup_requests=requests)
    target = os.path.join(base, litert.tflite_filename(int(os.path.basename(path)), mode))  # as its SavedModel
    report = export_tflite(path, target, cfg, mode, batches, eval_mode="eval" if has_eval else "train")
    return ExportResult(path=target, saved_model=path, tflite=report, warmup_requests=requests)


def best_weights(cfg: JobConfig, estimator) -> int | None:
    """With `eval.early_stopping.restore_best`, loads the best evaluation's weights (the ones the
    training restored, evaluated and exported) into the built `estimator`; returns their step,
    or None when the latest checkpoint's weights stay."""
    from tpuestimator.core.best_weights import restore_best_weights
    from tpuestimator.core.stopping import read_state

    rule = cfg.eval.early_stopping
    if not (rule and rule.restore_best):
        return None
    step = read_state(os.path.join(estimator.model_dir, "early_stopping.json")).get("best_step")
    if not isinstance(step, int) or step == estimator.global_step or not restore_best_weights(estimator, step):
        return None
    logger.info("exporting the weights of the best evaluation (step %d), as the training did", step)
    return step


def export_job(model_dir: str, out: str | None = None, *, format: str = "saved_model", quantize: str | None = None,
               warmup: int | None = None, overrides: Iterable[str] = ()) -> str:
    """`export_model`'s path: the SavedModel folder, or the .tflite file."""
    return export_model(model_dir, out, format=format, quantize=quantize, warmup=warmup, overrides=overrides).path


def check_count(name: str, value, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(name, value, f"an integer >= {minimum}")


def warmup_records(cfg: JobConfig, n: int) -> list[bytes]:
    """The first `n` eval records (train records without eval data) for warmup requests ([] for 0).

    Raises:
      ConfigError: for more than TF Serving reads or than the files hold.
    """
    if not n:
        return []
    from tpuestimator.serving import warmup

    return warmup.sample_records(cfg.data, n)


def write_warmup(export_dir: str, cfg: JobConfig, n: int, records: list[bytes] | None = None) -> int:
    """`n` TF Serving warmup requests (real eval records, or `records`) into an export; 0 writes nothing."""
    records = warmup_records(cfg, n) if records is None else records
    if not records:
        return 0
    from tpuestimator.serving import warmup

    return warmup.write_warmup_requests(export_dir, records, model_name=cfg.name or "")


def export_tflite(export_dir: str, target: str, cfg: JobConfig, quantize: str, representative_batches: int,
                  *, eval_mode: str = "eval") -> dict:
    """Converts an export to `target` (.tflite), verifies it on the eval records (decoded as in
    evaluation), and records the figures under `tflite` in the export's metadata."""
    from tpuestimator.system.io import atomic_write_bytes

    spec = data.resolve_section(cfg.data)
    batch_size = int(cfg.eval.batch_size)

    def batches(files):  # eval-mode decoding (no augmentation, no shuffle) of `files`, as clients send them
        for features, _ in data.client_layout_input(spec, files, mode="eval", batch_size=batch_size)():
            batch = {k: v.numpy() for k, v in features.items()}
            # a table's raw columns, named as the signature takes them (`Petal.Length`: `petal_length`)
            yield {input_name(k): v for k, v in batch.items()} if spec.feature_columns else batch

    calibrated = [0]

    def representative():  # the first batches of the TRAINING records, one example at a time
        taken = (b for _, b in zip(range(representative_batches), batches(pattern_for(spec, "train"))))
        for example in litert.single_examples(taken):
            calibrated[0] += 1
            yield example

    content = litert.convert(export_dir, quantize=quantize,
                             representative=representative if quantize == "int8" else None)
    atomic_write_bytes(target, content)
    checked = batches(pattern_for(spec, eval_mode))
    report = litert.verify(export_dir, content, checked, quantize=quantize)
    report.update(file=os.path.basename(target), quantize=quantize, tflite_bytes=len(content),
                  saved_model_bytes=litert.directory_bytes(export_dir),
                  representative_examples=calibrated[0],
                  verified_on=eval_mode)
    if not report["passed"]:
        logger.warning("the TFLite model %s misses its check: %s", target, report)
    info = read_export_info(export_dir)
    if info is None:
        raise ConfigError("EXPORT_DIR", export_dir, f"an export with assets.extra/{EXPORT_META}; export it again "
                          "with `tpuestimator export`")
    write_export_info(export_dir, info.with_tflite(report))
    return report
