"""The up-front scan of a job's data files, before training writes anything (`preflight`).

The input pipeline finds a corrupt, truncated, empty or wrongly shaped file only when it
reaches it, which can be hours into a training, after checkpoints and a run record were
written. `scan_files` reads, for EVERY file of a split, its TFRecord framing (the length
header and both CRCs, checked by TensorFlow's reader) and its first records, checked against
the record spec (features, dtypes, sizes) and decoded as evaluation decodes them (images,
label range, `data.assertions`): a `DataError` naming the file and the record.

Bounded: at most `RECORDS` records and `BYTES` record bytes per file and `SECONDS` for the
whole scan (then the rest of the files is left to the pipeline's own checks, logged), so a
large dataset costs a fixed start-up time. A file's damage past its first records (a byte
flipped at record 10,000) is still found only when the pipeline reaches it.
"""
from __future__ import annotations

import logging
import time
from typing import Any

import tensorflow as tf

from tpuestimator.data import spec as specs
from tpuestimator.data.decode import list_files
from tpuestimator.data.diagnose import batch_decoder, scan_file
from tpuestimator.errors import DataError

log = logging.getLogger(__name__)

# The first 32 records of each file (a few ms per file here; the digits files hold 117-byte
# records, flowers' 224x224 JPEGs about 30 kB), at most 4 MiB of them, and 30 s in all.
RECORDS = 32
BYTES = 4 * 2 ** 20
SECONDS = 30.0


def scan_files(data_section: Any, mode: str, *, num_classes: int | None = None,
               records: int = RECORDS, max_bytes: int = BYTES, seconds: float = SECONDS) -> int:
    """Scans the head of every file of `mode`'s split (module docstring).

    Returns:
      The number of files scanned (fewer than listed when `seconds` ran out).

    Raises:
      DataError: no files, every file empty, or a file whose framing or first records are bad
        (file, record index and feature named).
    """
    spec = specs.resolve_section(data_section)
    files = list_files(specs.pattern_for(spec, mode))
    sizes = {path: tf.io.gfile.stat(path).length for path in files}
    if not any(sizes.values()):
        raise DataError(f"The {len(files)} file(s) of data.{'train' if mode == 'train' else 'eval'} are empty "
                        f"(0 bytes): no records to read, first {files[0]}. Rewrite them with "
                        "`tpuestimator data write`.", path=files[0], record=0)
    if num_classes is None:
        num_classes = specs.num_classes(spec)
    deadline = time.monotonic() + seconds
    corrupt_ok = spec.skips_corrupt
    decoder = batch_decoder(spec, mode, num_classes=num_classes)
    for count, path in enumerate(files):
        if time.monotonic() > deadline:
            log.warning("data scan of %s: stopped after %.0f s at file %d of %d; the pipeline checks the others "
                        "as it reads them", mode, seconds, count, len(files))
            return count
        if not sizes[path]:
            log.warning("%s is empty (0 bytes); it contributes no records", path)
            continue
        found = scan_file(spec, path, "eval" if mode == "train" else mode, num_classes=num_classes,
                          max_records=records, max_bytes=max_bytes, corrupt_ok=corrupt_ok, batch=records,
                          decoder=decoder)
        if found is not None:
            raise found
    return len(files)
