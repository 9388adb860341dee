"""Jobs on an export (a SavedModel folder written by tpuestimator): offline evaluation and
batch prediction, no checkpoint and no model function needed.

- `evaluate_export(export_dir, data_pattern=)`: accuracy, AUC (binary; one-vs-rest macro for
  several classes), log-loss, the confusion matrix and the per-class table, computed streaming
  over batches (`classification_metrics`), recorded as a run (evaluation.json with the scalar
  metrics; `confusion_matrix.png`, `confusion_matrix.csv`, `per_class.csv` and
  `evaluation_details.json` as artifacts).
- `predict_to_file(export_dir, inputs, out)`: streaming batch prediction into a CSV or
  Parquet file (`batch_predict`, `prediction_files`), memory flat in the number of records.
- `predict_columns(export_dir, inputs)`: the same predictions as columns in memory (R's
  `tpu_predict()` on files).

The CLI's `tpuestimator evaluate EXPORT_DIR` / `predict ... --out` and R's `tpu_evaluate()` /
`tpu_predict()` call these.
"""
from __future__ import annotations

import csv
import logging
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from tpuestimator.errors import ConfigError
from tpuestimator.runs import RunRecorder
from tpuestimator.runs.confusion_plot import write_confusion_png
from tpuestimator.serving.batch_predict import ExportPredictor, iter_labelled_batches, iter_predictions
from tpuestimator.serving.classification_metrics import ClassificationReport, StreamingClassificationMetrics
from tpuestimator.serving.exports import is_export_dir
from tpuestimator.serving.prediction_files import PredictionFileWriter, prediction_columns
from tpuestimator.serving.regression_metrics import RegressionReport, StreamingRegressionMetrics, write_residual_png
from tpuestimator.system.io import atomic_write_json

__all__ = ["evaluate_export", "is_export_dir", "predict_columns", "predict_to_file"]

log = logging.getLogger(__name__)

Progress = Callable[[int], None]  # called with the number of records of each batch done


def _num_classes(predictor: ExportPredictor, first_outputs: dict) -> int:
    probs = first_outputs.get("probabilities")
    if probs is None:
        raise ConfigError("EXPORT_DIR", predictor.export_dir, "a classifier export (its signature returns "
                          f"'probabilities'); this one returns {sorted(first_outputs)}")
    probs = np.asarray(probs)
    return 2 if probs.ndim == 1 or probs.shape[1] == 1 else int(probs.shape[1])


def evaluate_export(export_dir: str, *, data_pattern: str | list[str] | None = None, batch_size: int = 256,
                    runs_dir: str | None = None, record: bool = True,
                    progress: Progress | None = None) -> dict:
    """Evaluates an export offline on labelled TFRecord files.

    Args:
      export_dir: the SavedModel folder (with `assets.extra/tpuestimator.json`).
      data_pattern: TFRecord glob(s) in the training data's format; default the training's
        `data.eval` (from the export's metadata).
      batch_size: examples per signature call.
      runs_dir: where the run record goes (default ``runs``).
      record: write a run record.
      progress: called with each batch's size.

    Returns:
      `accuracy`, `auc`, `log_loss`, `macro_precision`/`recall`/`f1`, `num_examples`,
      `auc_per_class`, `confusion_matrix` (list of rows, true class first), `per_class`
      (list of {class_id, class, precision, recall, f1, support}), `class_names`, and
      `run_dir` when recorded.
    """
    if isinstance(data_pattern, str) and "," in data_pattern:
        data_pattern = [p for p in data_pattern.split(",") if p]
    predictor = ExportPredictor(export_dir)
    recorder = None
    if record:
        spec = predictor.resolved_data_section(data_pattern, mode="eval")
        # the run's archived config: a dict (serialization)
        config = {"model": predictor.info.model, "data": spec.as_section(),
                  "eval": {"batch_size": batch_size}}
        flags = {"export_dir": os.path.abspath(predictor.export_dir), "data": _as_text(spec.eval)}
        props = {"type": "evaluation", "export_dir": os.path.abspath(predictor.export_dir)}
        if predictor.info.global_step is not None:
            props["global_step"] = predictor.info.global_step
        recorder = RunRecorder.create(runs_dir or "runs", config=config, flags=flags, script=None,
                                      planned_rows=None, properties=props)
    regression = predictor.info.task == "regression"
    try:
        if regression:
            report, points = _evaluate_regression(predictor, data_pattern, batch_size, progress)
        else:
            report = _evaluate(predictor, data_pattern, batch_size, progress)
        out = report.to_dict()
        if recorder is not None:
            if regression:
                _record_regression(recorder, report, points)
            else:
                _record(recorder, report)
            out["run_dir"] = str(recorder.run_dir)
    except BaseException as exc:
        if recorder is not None:
            recorder.fail(exc, plots=False)
        raise
    if recorder is not None:
        recorder.complete(plots=False)
    return out


def _evaluate(predictor: ExportPredictor, data_pattern, batch_size: int, progress) -> ClassificationReport:
    metrics = None
    for labels, outputs in iter_labelled_batches(predictor, data_pattern, batch_size=batch_size):
        if metrics is None:
            metrics = StreamingClassificationMetrics(_num_classes(predictor, outputs), predictor.class_names)
        metrics.update(labels, outputs["probabilities"])
        if progress is not None:
            progress(len(labels))
    if metrics is None:
        raise ConfigError("--data", _as_text(data_pattern), "TFRecord files holding at least one example")
    return metrics.result()


def _evaluate_regression(predictor: ExportPredictor, data_pattern, batch_size: int, progress):
    metrics = StreamingRegressionMetrics()
    for labels, outputs in iter_labelled_batches(predictor, data_pattern, batch_size=batch_size):
        metrics.update(labels, outputs["prediction"])
        if progress is not None:
            progress(len(labels))
    if metrics.n == 0:
        raise ConfigError("--data", _as_text(data_pattern), "TFRecord files holding at least one example")
    return metrics.result(), metrics.points


def _record_regression(recorder: RunRecorder, report: RegressionReport, points) -> None:
    recorder.set_properties(samples=report.num_examples)
    recorder.write_evaluation(report.scalars())
    with tempfile.TemporaryDirectory(prefix="tpue-eval-") as tmp:
        tmp = Path(tmp)
        write_residual_png(points, tmp / "residuals.png")
        atomic_write_json(tmp / "evaluation_details.json", report.to_dict())
        for name in ("residuals.png", "evaluation_details.json"):
            recorder.add_artifact(tmp / name, name)


def _as_text(value) -> str:
    return ",".join(value) if isinstance(value, (list, tuple)) else str(value)


def _record(recorder: RunRecorder, report: ClassificationReport) -> None:
    recorder.set_properties(samples=report.num_examples)
    recorder.write_evaluation(report.scalars())
    with tempfile.TemporaryDirectory(prefix="tpue-eval-") as tmp:
        tmp = Path(tmp)
        write_confusion_png(report.confusion_matrix, report.class_names, tmp / "confusion_matrix.png")
        names = report.class_names
        with open(tmp / "confusion_matrix.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(["true\\predicted", *names])
            writer.writerows([names[i], *(int(v) for v in row)] for i, row in enumerate(report.confusion_matrix))
        with open(tmp / "per_class.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=["class_id", "class", "precision", "recall", "f1", "support",
                                                   "auc"])
            writer.writeheader()
            for row, auc in zip(report.per_class, report.auc_per_class):
                writer.writerow({**row, "auc": "" if auc is None else auc})
        atomic_write_json(tmp / "evaluation_details.json", report.to_dict())
        for name in ("confusion_matrix.png", "confusion_matrix.csv", "per_class.csv", "evaluation_details.json"):
            recorder.add_artifact(tmp / name, name)


def predict_to_file(export_dir: str, inputs: str | Iterable[str], out: str | os.PathLike, *, batch_size: int = 1024,
                    progress: Progress | None = None) -> dict:
    """Predicts over TFRecord/image files into a CSV or Parquet file, batch by batch.

    Args:
      export_dir: the SavedModel folder.
      inputs: file paths or glob patterns.
      out: the `.csv` or `.parquet` file (written atomically).
      batch_size: records per signature call (and per written batch).
      progress: called with each batch's size.

    Returns:
      {"path": the file, "rows": the number of predictions, "format": "csv" or "parquet"}.
    """
    writer = PredictionFileWriter(out)   # checks the suffix (and pyarrow) before loading the model
    with writer:
        predictor = ExportPredictor(export_dir)
        for batch in iter_predictions(predictor, inputs, batch_size=batch_size):
            writer.write(prediction_columns(batch, predictor.class_names))
            if progress is not None:
                progress(len(batch))
    log.info("Wrote %d predictions to %s", writer.rows, writer.path)
    return {"path": str(writer.path), "rows": writer.rows, "format": writer.format}


def predict_columns(export_dir: str, inputs: str | Iterable[str], *, batch_size: int = 1024) -> dict[str, list]:
    """The predictions of `predict_to_file` as {column: list} in memory."""
    predictor = ExportPredictor(export_dir)
    columns: dict[str, list] = {}
    for batch in iter_predictions(predictor, inputs, batch_size=batch_size):
        for name, values in prediction_columns(batch, predictor.class_names).items():
            columns.setdefault(name, []).extend(values.tolist())
    return columns
