"""The label-range check before training: every label of a split read on the host, cheaply.

The pipeline asserts the label range on the device too (assertions.py), but an out-of-range
label in the EVAL data would only fail at the first evaluation, after training and
checkpointing. `check_labels` reads only the label feature of each record (no image decoding)
and names the first bad record before anything is trained or written.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from tpuestimator.data import spec as specs
from tpuestimator.data.decode import list_files
from tpuestimator.errors import DataError

# Splits larger than this are left to the pipeline's own check (read on the host they would
# delay the start). Label-only parsing of the smallest records (digits, 117 bytes) took 0.6 s
# for 16 MiB (140,000 records) and 2.0 s for 64 MiB on a shared 2-core machine; larger records
# (images) cost less per MiB.
MAX_SCAN_BYTES = 32 * 2 ** 20
_BATCH = 4096


def check_labels(data_section: Any, mode: str, *, num_classes: int | None,
                 max_bytes: int | None = None) -> bool:
    """Checks that every label of the mode's files lies in [0, num_classes) after `label_offset`.

    Returns:
      True when the files were checked, False when skipped (no label, no class count, files
      over `max_bytes` (default `MAX_SCAN_BYTES`) in all, or a corrupt file: the pipeline reports those with the record).

    Raises:
      DataError: naming the file, the record index, the label feature, its value and the range.
    """
    spec = specs.resolve_section(data_section)
    label = spec.label
    if not label or not num_classes or mode == "predict":
        return False
    files = list_files(specs.pattern_for(spec, mode))
    if sum(tf.io.gfile.stat(f).length for f in files) > (MAX_SCAN_BYTES if max_bytes is None else max_bytes):
        return False
    offset = int(spec.label_offset)
    parse = {label: tf.io.FixedLenFeature([], tf.int64, default_value=offset)}
    for path in files:
        start = 0
        try:
            labels = tf.data.TFRecordDataset(path).batch(_BATCH).map(
                lambda batch: tf.io.parse_example(batch, parse)[label], num_parallel_calls=tf.data.AUTOTUNE)
            for stored in labels.prefetch(2).as_numpy_iterator():
                bad = np.flatnonzero((stored - offset < 0) | (stored - offset >= num_classes))
                if bad.size:
                    index = start + int(bad[0])
                    raise DataError(
                        f"{path}: record {index} has a label out of range: {label}={int(stored[bad[0]])}; labels "
                        f"must lie in [0, {num_classes}) after subtracting data.label_offset={offset}. Nothing was "
                        "trained. Check data.label_offset and data.vocabulary / params.num_classes, or relabel "
                        "the record.",
                        path=path, record=index, feature=label)
                start += len(stored)
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError):
            return False  # a corrupt or mis-typed file: the pipeline's check names its record
    return True
