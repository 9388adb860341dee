"""Bad data, found and named: the file, the record index, the feature, what was expected.

TensorFlow reports bad records from inside the input pipeline (`DataLossError` for corrupt
or truncated files, `InvalidArgumentError` for a missing feature, a wrong dtype or shape, or
a failed `data.assertions` check) without saying which file or record. The functions here
re-scan the files on the host when that happens and raise a `DataError` that does.

The core wraps its input iteration in `translate_errors(data_section, mode)`.
"""
from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorflow as tf

from tpuestimator.core import workarounds
from tpuestimator.data import spec as specs
from tpuestimator.data.assertions import ASSERT_MARKER, LABEL_MARKER
from tpuestimator.data.decode import list_files, make_batch_decoder
from tpuestimator.errors import DataError

log = logging.getLogger(__name__)

_KIND_LIST = {"float32": "float_list", "int64": "int64_list", "string": "bytes_list"}
_INPUT_HINTS = ("IteratorGetNext", "ParseExample", "DecodeRaw", "decode_raw", "TFRecord", "corrupted record",
                "truncated record", "Feature:", "Key:", "DecodeImage", "DecodeJpeg", "DecodePng",
                "MultiDeviceIterator", "Input to reshape")


def check_example(spec: specs.DataSpec, example: tf.train.Example, mode: str = "train") -> tuple[str, str] | None:
    """Checks one parsed `tf.train.Example` against the data's record spec.

    Returns:
      None when it matches, else (feature, what is wrong and what was expected).
    """
    feats = example.features.feature
    columns = specs.feature_columns(spec) or {}
    for name, feature in specs.record_features(spec).items():
        if name not in feats:
            if feature.kind == "label" and mode == "predict":
                continue
            if name in columns and columns[name].missing_policy != "error":
                continue  # a table's missing value: the writer leaves it out, the parser fills in the policy's
            present = ", ".join(sorted(feats)) or "none"
            return name, (f"feature {name!r} is missing (the record has: {present}); expected "
                          f"{feature.dtype} of shape {feature.shape}")
        feat = feats[name]
        kind = feat.WhichOneof("kind")
        want = _KIND_LIST[feature.dtype]
        if kind != want:
            return name, f"feature {name!r} is a {kind}; expected {want} ({feature.dtype})"
        values = getattr(feat, kind).value
        n = int(np.prod(feature.shape)) if feature.shape else 1
        if len(values) != n:
            return name, (f"feature {name!r} has {len(values)} value(s); expected {n} "
                          f"(dtype {feature.dtype}, shape {feature.shape})")
        if feature.kind == "raw_image":
            shape = feature.image_shape or spec.image.shape
            size = int(np.prod(shape))
            if len(values[0]) != size:
                return name, (f"feature {name!r} holds {len(values[0])} bytes; expected {size} uint8 pixels "
                              f"for an image of shape {shape} (check data.image)")
    return None


def iter_records(path: str) -> Iterator[tuple[int, bytes | None, str | None]]:
    """Yields (index, serialized, None) per record, then (index, None, error) if the file is corrupt."""
    i = 0
    it = iter(tf.data.TFRecordDataset(path))
    while True:
        try:
            rec = next(it)
        except StopIteration:
            return
        except (tf.errors.DataLossError, tf.errors.OutOfRangeError, tf.errors.InvalidArgumentError) as exc:
            yield i, None, exc.message
            return
        yield i, rec.numpy(), None
        i += 1


def check_first_record(spec: specs.DataSpec, files: list[str], mode: str) -> None:
    """Checks the first record of the first non-empty file (a cheap check before training starts).

    Raises:
      DataError: naming the file, record 0 and the feature, when the format does not match.
    """
    for path in files:
        if tf.io.gfile.stat(path).length == 0:
            continue
        for i, rec, err in iter_records(path):
            if err is not None:
                if spec.skips_corrupt:
                    return
                raise _corrupt_error(path, i, err)
            problem = check_example(spec, tf.train.Example.FromString(rec), mode)
            if problem:
                raise _feature_error(spec, path, i, *problem)
            return
    return


def clean_message(message: str) -> str:
    """A TensorFlow error message without node/function names and op tags."""
    import re

    text = message.replace("\\'", "'").replace('\\"', '"')
    text = text.split("\n\t [[")[0]
    text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", text)
    text = re.sub(r"\s*\[Op:[^\]]*\]( name:)?\s*", " ", text)
    text = re.sub(r"\s*\[\[\{\{node [^}]*\}\}\]\]", "", text)
    return " ".join(text.split()).strip()


def _corrupt_error(path: str, index: int, message: str) -> DataError:
    return DataError(f"{path}: record {index} is corrupt or truncated ({clean_message(message)}). "
                     "Rewrite the file with `tpuestimator data write`, remove it from the pattern, or set "
                     "data.on_corrupt: skip to skip the rest of a corrupt file.", path=path, record=index)


def _feature_error(spec: specs.DataSpec, path: str, index: int, feature: str, problem: str) -> DataError:
    return DataError(f"{path}: record {index}: {problem}. The data section says format {spec.format!r}; "
                     "fix data.format / data.features / data.image to match the records, or rewrite them.",
                     path=path, record=index, feature=feature)


def batch_decoder(spec: specs.DataSpec, mode: str, *, num_classes: int | None = None):
    """`decode(serialized records)`: the eval decoder as a `tf.function` (`scan_file`)."""
    return tf.function(make_batch_decoder(spec, "eval" if mode == "train" else mode, num_classes=num_classes),
                       reduce_retracing=True)


def scan_file(spec: specs.DataSpec, path: str, mode: str = "eval", *,
              num_classes: int | None = None, decode: bool = True, batch: int = 256,
              max_records: int | None = None, max_bytes: int | None = None,
              corrupt_ok: bool = False, decoder=None) -> DataError | None:
    """Re-reads one file on the host and returns a `DataError` for its first bad record (or None).

    Checks, in order: the file is readable to the end (corruption), each record matches the
    record spec (features, dtypes, sizes), and, with `decode`, the records decode (images)
    and pass the label range and `data.assertions`. `max_records` / `max_bytes` stop the read
    after that many records / record bytes (the preflight scan's bound); `corrupt_ok`
    (`data.on_corrupt: skip`) ends the scan at a corrupt record without an error. `decoder`:
    one `batch_decoder(spec, mode)` for many files (built, and traced, once).
    """

    if decoder is None and decode:
        decoder = batch_decoder(spec, mode, num_classes=num_classes)
    pending: list[tuple[int, bytes]] = []

    def flush() -> DataError | None:
        if not pending or decoder is None:
            return None
        try:
            decoder(tf.constant([r for _, r in pending]))
            return None
        except tf.errors.InvalidArgumentError:
            pass
        for idx, rec in pending:  # find the record within the batch
            try:
                decoder(tf.constant([rec]))
            except tf.errors.InvalidArgumentError as exc:
                return _decode_error(spec, path, idx, exc.message)
        return None

    seen_bytes = 0
    for i, rec, err in iter_records(path):
        if err is not None:
            return flush() or (None if corrupt_ok else _corrupt_error(path, i, err))
        seen_bytes += len(rec)
        problem = check_example(spec, tf.train.Example.FromString(rec), mode)
        if problem:
            return flush() or _feature_error(spec, path, i, *problem)
        pending.append((i, rec))
        if len(pending) >= batch:
            found = flush()
            if found:
                return found
            pending.clear()
        if max_records is not None and i + 1 >= max_records or max_bytes is not None and seen_bytes >= max_bytes:
            break  # before reading the next record
    return flush()


def _decode_error(spec: specs.DataSpec, path: str, index: int, message: str) -> DataError:

    text = clean_message(message)
    if ASSERT_MARKER in text:
        detail = text[text.index(ASSERT_MARKER) + len(ASSERT_MARKER) + 1:].replace(":] [", ": [").strip()
        feature = detail.split("'")[1] if "'" in detail else None
        return DataError(f"{path}: record {index} fails data.assertions: {detail}. Fix or drop the record, or "
                         "relax the assertion.", path=path, record=index, feature=feature)
    if LABEL_MARKER in text:
        detail = text[text.index(LABEL_MARKER) + len(LABEL_MARKER) + 1:].replace(":] [", ": [").strip()
        return DataError(f"{path}: record {index} has a label out of range: {detail}. Check data.label_offset "
                         "and data.vocabulary (its length is the number of classes), or relabel the record.",
                         path=path, record=index, feature=spec.label)
    return DataError(f"{path}: record {index} cannot be decoded as format {spec.format!r}: {text}. "
                     "Check that its images are valid JPEG/PNG and match data.image, or rewrite the records.",
                     path=path, record=index)


def diagnose(data_section: Any, mode: str, exc: BaseException | None = None, *,
             num_classes: int | None = None) -> DataError | None:
    """Finds the bad record behind an input-pipeline error by re-scanning the mode's files.

    Returns:
      A `DataError` naming file, record and feature, or None when every record is fine
      (the error did not come from the data).
    """

    spec = specs.resolve_section(data_section)
    if num_classes is None:
        num_classes = specs.num_classes(spec)
    files = list_files(specs.pattern_for(spec, mode))
    for path in files:
        found = scan_file(spec, path, mode, num_classes=num_classes)
        if found is not None:
            return found
    return None


def _looks_like_input_error(exc: BaseException) -> bool:

    if isinstance(exc, tf.errors.DataLossError):
        return True
    msg = getattr(exc, "message", str(exc))
    return any(h in msg for h in _INPUT_HINTS + (ASSERT_MARKER, LABEL_MARKER))


@contextlib.contextmanager
def translate_errors(data_section: Any, mode: str, *, num_classes: int | None = None) -> Iterator[None]:
    """Turns TensorFlow errors raised while iterating the input into a `DataError` naming the record.

    Use around the loop that pulls batches from `make_input_fn(...)`'s dataset. Errors that
    do not come from the data are re-raised unchanged.
    """
    try:
        yield
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as exc:
        # TensorFlow's frames in the error hold the iterator that read the bad record
        workarounds.drop_tensorflow_frame_locals(exc)
        if not _looks_like_input_error(exc):
            raise
        found = diagnose(data_section, mode, exc, num_classes=num_classes)
        if found is None:
            raise
        raise found from exc


# Files read by pipelines built with data.on_corrupt: skip (for `corrupt_records_skipped()`).
_SKIP_FILES: set[str] = set()
_SCAN_CACHE: dict[tuple, int | None] = {}


def register_skipping(files: list[str]) -> None:
    """Records files a pipeline reads with `on_corrupt: skip` (called by the pipeline)."""
    _SKIP_FILES.update(files)


def _first_bad(path: str) -> tuple[int | None, int]:
    """(index of the first unreadable record or None, readable records before it); cached per file version."""
    st = tf.io.gfile.stat(path)
    key = (path, st.length, st.mtime_nsec)
    if key not in _SCAN_CACHE:
        good, bad = 0, None
        for i, _record, err in iter_records(path):
            if err is not None:
                bad = i
                break
            good += 1
        _SCAN_CACHE[key] = (bad, good)
    return _SCAN_CACHE[key]


def count_corrupt(pattern: str | list[str]) -> dict[str, Any]:
    """Scans files for corruption without parsing records.

    Returns:
      {"files": n, "records": readable records, "corrupt_files": {path: index of the first
      bad record}}. Records after a corruption point cannot be recovered (TFRecord files have
      no sync markers), so with `data.on_corrupt: skip` each corrupt file loses the rest of it.
    """

    out: dict[str, Any] = {"files": 0, "records": 0, "corrupt_files": {}}
    for path in list_files(pattern):
        out["files"] += 1
        bad, good = _first_bad(path)
        out["records"] += good
        if bad is not None:
            out["corrupt_files"][path] = bad
    return out


def corrupt_records_skipped(data_section: Any = None, mode: str = "train") -> int:
    """How many corrupt files `data.on_corrupt: skip` cut short (0 when all are clean).

    Each corrupt file is skipped from its first bad record to its end (see `count_corrupt`).
    Without arguments, scans every file that pipelines built in this process read with
    `on_corrupt: skip` (what the core puts in the run record); with a data section, scans
    that section's files for `mode`. Results are cached per file version.
    """
    if data_section is not None:
        files = list_files(specs.pattern_for(specs.resolve_section(data_section), mode))
    else:
        files = sorted(_SKIP_FILES)
    n = 0
    for path in files:
        bad, good = _first_bad(path)
        if bad is not None:
            n += 1
            log.warning("%s is corrupt from record %d on; data.on_corrupt=skip skipped the rest of it", path, bad)
    return n


def num_examples(data_section: Any, mode: str = "train") -> int | None:
    """Records in the mode's split: the manifest's count, else a scan when the files total under 16 MiB."""
    spec = specs.resolve_section(data_section)
    key = "train" if mode == "train" else "eval"
    if spec.manifest:
        info = spec.manifest_splits.get(key)
        pattern = spec.train if key == "train" else spec.eval
        if info and pattern == os.path.join(spec.manifest_dir, info.get("pattern", "")):
            return int(info["count"])

    try:
        files = list_files(specs.pattern_for(spec, mode))
    except DataError:
        return None
    if sum(tf.io.gfile.stat(f).length for f in files) > 16 * 2 ** 20:
        return None
    return count_corrupt(files)["records"]
