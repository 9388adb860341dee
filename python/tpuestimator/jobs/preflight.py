"""What a training job checks before it writes anything (no model dir contents, no run record).

Errors that used to arrive after TensorFlow start-up, a failed run record or even a trained
checkpoint are found here first: the model function (imported when the Estimator is built),
batch sizes that do not split over the replicas, corrupt, truncated, empty or wrongly shaped
files (the framing and first records of every train and eval file, bounded: `data.scan`), and
labels out of range in the train or eval data (read on the host, label feature only,
`data.labels.check_labels`).
"""
from __future__ import annotations

from tpuestimator import data
from tpuestimator.config import JobConfig
from tpuestimator.models.params import DataParams


def check_job(cfg: JobConfig, estimator, *, has_eval: bool, scan_data: bool = True) -> None:
    """Raises the `ConfigError` / `DataError` a job would otherwise meet mid-way.

    Args:
      cfg: the job's config.
      estimator: its Estimator (built: the model function is resolved, the strategy made).
      has_eval: the job evaluates (its eval batch and eval labels are checked too).
      scan_data: False leaves the files and labels unread (data the caller has just written
        from checked values: `tables.train_table`) unless the config has `data.assertions`,
        which no writer checked; the batch sizes are still checked.
    """
    estimator.per_replica_batch(cfg.train.batch_size, "train.batch_size")
    if has_eval:
        estimator.per_replica_batch(cfg.eval.batch_size, "eval.batch_size")
    spec = data.resolve_section(cfg.data)
    if not scan_data and not spec.assertions:
        return
    num_classes = data.num_classes(spec) or DataParams.from_params(estimator.params).num_classes
    for mode in ("train", "eval") if has_eval else ("train",):
        # Labels first: their check reads further and says what the scan cannot (nothing trained).
        data.check_labels(spec, mode, num_classes=num_classes)
        data.scan_files(spec, mode, num_classes=num_classes)
