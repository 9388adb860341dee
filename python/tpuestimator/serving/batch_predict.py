"""Streaming prediction with an export: TFRecord files and image files in, one
`PredictionBatch` at a time out, so memory stays flat in the number of records.

- `ExportPredictor(export_dir)`: a loaded export, its metadata and its signatures:
  `serving_default` on serialized `tf.Example`s when the export has it, `image_bytes` on
  raw JPEG/PNG bytes, and the decoded-features signature (`features`; `serving_default` in
  exports written before the three signatures).
- `iter_predictions(predictor, inputs, batch_size=)`: TFRecord files go through the
  `tf.Example` signature when the export has one, else through the data layer's decoder and
  the features signature; image files through `image_bytes` when the export has it, else
  decoded as training did (`data.decode.decode_image_files`). Each batch names its rows'
  source file and record index in that file.
- `iter_labelled_batches(predictor, pattern, batch_size=)`: (labels, outputs) batches of the
  eval pipeline (`data.make_input_fn(..., "eval")`: the exact inputs `Estimator.evaluate`
  reads) through the features signature, for offline evaluation.

The CLI's `tpuestimator predict` / `evaluate EXPORT_DIR` and R reach this through
`export_jobs.py`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from tpuestimator.errors import ConfigError, DataError
from tpuestimator.serving.exports import (
    EXAMPLES_SIGNATURE,
    EXPORT_META,
    FEATURES_SIGNATURE,
    IMAGE_BYTES_SIGNATURE,
    open_export,
)

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
# A TFRecord record on disk: 8-byte length + 4-byte CRC (the header), the data, a 4-byte CRC.
# TensorFlow reads fewer bytes than a header at a file's end as the end of the file, silently.
RECORD_HEADER_BYTES = 12
RECORD_OVERHEAD_BYTES = 16


@dataclasses.dataclass(frozen=True, kw_only=True)
class PredictionBatch:
    """One batch of predictions.

    Attributes:
      source: str [b]: the file each row came from.
      index: int64 [b]: the record's index in its file (0 for an image file).
      outputs: the signature's outputs as numpy arrays (`probabilities` [b, k], `class_id` [b],
        `class` [b] bytes, ...).
    """

    source: np.ndarray
    index: np.ndarray
    outputs: dict

    def __len__(self) -> int:
        return int(self.index.shape[0])


class ExportPredictor:
    """A tpuestimator export, loaded once (`serving.open_export`): which signature reads what.

    Args:
      export_dir: the SavedModel folder (or a run folder holding `export/`).

    Raises:
      ConfigError: `export_dir` is not a SavedModel.
    """

    def __init__(self, export_dir: str | os.PathLike):
        self.export = open_export(os.fspath(export_dir))
        self.export_dir = self.export.path
        self.info = self.export.info
        names = set(self.export.signature_names)
        self.class_names = list(self.info.class_names)
        self.data_section = dict(self.info.data)
        # serving_default on tf.Example records; in exports from before the three signatures it
        # took the decoded features (today's `features` signature)
        self.takes_examples = EXAMPLES_SIGNATURE in names and _single_string_input(self.export, EXAMPLES_SIGNATURE)
        self.takes_image_bytes = IMAGE_BYTES_SIGNATURE in names and \
            _single_string_input(self.export, IMAGE_BYTES_SIGNATURE)
        if FEATURES_SIGNATURE in names:
            self.features_signature = FEATURES_SIGNATURE
        elif EXAMPLES_SIGNATURE in names and not self.takes_examples:
            self.features_signature = EXAMPLES_SIGNATURE
        else:
            self.features_signature = None

    def run_features(self, features: dict) -> dict:
        """Outputs (numpy) of the decoded-features signature on a batch of feature tensors."""
        if self.features_signature is None:
            raise ConfigError("EXPORT_DIR", self.export_dir, "an export with a decoded-features signature "
                              f"('{FEATURES_SIGNATURE}'); this one has {self.export.signature_names}")
        specs = self.export.input_specs(self.features_signature)
        return self.export.run(self.features_signature, {k: v for k, v in features.items() if k in specs})

    def run_examples(self, serialized) -> dict:
        """Outputs of the `tf.Example` signature (`serving_default`) on a batch of serialized records."""
        return self.export.run(EXAMPLES_SIGNATURE, serialized)

    def run_image_bytes(self, encoded) -> dict:
        """Outputs of the `image_bytes` signature on a batch of JPEG/PNG bytes."""
        return self.export.run(IMAGE_BYTES_SIGNATURE, encoded)

    def resolved_data_section(self, pattern: str | list[str] | None = None, *, mode: str = "eval"):
        """The `DataSpec` of the training's data section (from the export's metadata), reading
        `pattern` in `mode` (the train files only in train mode)."""
        from tpuestimator import data

        if not self.data_section:
            raise ConfigError("EXPORT_DIR", self.export_dir, f"an export with assets.extra/{EXPORT_META} (its data "
                              "section says how to read records); re-export it with `tpuestimator export`")
        # what is read here goes to the export's signatures, which take the client layout and
        # apply `data.transpose_input` themselves
        spec = data.resolve_section(self.data_section).replace(transpose_input=False, table_raw=True)
        if mode == "train":
            return spec.replace(train=pattern) if pattern is not None else spec
        # predict reads data.eval (data.spec.pattern_for)
        return spec.replace(train=None, eval=pattern if pattern is not None else spec.eval)


def _single_string_input(export, name: str) -> bool:
    """True for a signature taking one string vector (tf.Example records or image bytes)."""
    import tensorflow as tf

    inputs = export.input_specs(name)
    if len(inputs) != 1:
        return False
    spec = next(iter(inputs.values()))
    return spec.dtype == tf.string and spec.shape.rank == 1


def expand_inputs(inputs: str | os.PathLike | Iterable[str | os.PathLike]) -> list[str]:
    """File paths and glob patterns -> the sorted files of each, in the order given.

    Raises:
      DataError: naming a path or pattern that matches no file.
    """
    import tensorflow as tf

    items = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    if not items:
        raise ConfigError("FILE", [], "at least one TFRecord or image file (or glob pattern)")
    files: list[str] = []
    for item in items:
        item = os.fspath(item)
        matched = sorted(tf.io.gfile.glob(item)) if any(ch in item for ch in "*?[") else \
            ([item] if tf.io.gfile.exists(item) else [])
        matched = [m for m in matched if not tf.io.gfile.isdir(m)]
        if not matched:
            raise DataError(f"No file matches {item!r}: pass TFRecord files or JPEG/PNG images (paths or glob "
                            "patterns).", path=item)
        files.extend(matched)
    return files


def iter_predictions(predictor: ExportPredictor, inputs, *, batch_size: int = 1024) -> Iterator[PredictionBatch]:
    """Streams predictions over TFRecord and image files (see the module docstring).

    Args:
      predictor: the loaded export.
      inputs: file paths and glob patterns (TFRecords, or `.jpg`/`.jpeg`/`.png` images).
      batch_size: records per signature call.

    Yields:
      `PredictionBatch`es in file order, records in file order.
    """
    if batch_size < 1:
        raise ConfigError("batch_size", batch_size, "an integer >= 1")
    files = expand_inputs(inputs)
    images = [f for f in files if f.lower().endswith(IMAGE_SUFFIXES)]
    records = [f for f in files if not f.lower().endswith(IMAGE_SUFFIXES)]
    if records:
        yield from _record_batches(predictor, records, batch_size)
    for start in range(0, len(images), batch_size):
        yield _image_batch(predictor, images[start:start + batch_size])


def _record_batches(predictor: ExportPredictor, paths: list[str], batch_size: int) -> Iterator[PredictionBatch]:
    """One tf.data pipeline over every file (no per-file set-up): (file, index in file, record)
    elements, batched across file boundaries, decoded in the pipeline when the export has no
    tf.Example signature."""
    import tensorflow as tf

    from tpuestimator import data

    sizes = {path: _record_file_size(path) for path in paths}   # before any prediction
    spec = predictor.resolved_data_section(paths, mode="predict") if predictor.data_section else None
    buffer = int(spec.read_buffer_mb if spec is not None else 8) * 1024 * 1024

    def read(path):
        return tf.data.TFRecordDataset(path, buffer_size=buffer).enumerate().map(
            lambda i, r: (path, i, r, tf.strings.length(r)))

    ds = tf.data.Dataset.from_tensor_slices(paths).flat_map(read).batch(batch_size)
    if predictor.takes_examples:
        run = predictor.run_examples
    else:
        from tpuestimator.data.decode import make_batch_decoder

        decoder = make_batch_decoder(spec, "predict")
        ds = ds.map(lambda f, i, s, n: (f, i, decoder(s)[0], n), num_parallel_calls=tf.data.AUTOTUNE)
        run = predictor.run_features
    ds = ds.prefetch(2)
    names = {p.encode(): p for p in paths}
    read_bytes = dict.fromkeys(paths, 0)
    records = dict.fromkeys(paths, 0)
    with data.translate_errors(spec, "predict") if spec is not None else contextlib.nullcontext():
        for sources, index, batch, lengths in ds:
            outputs = run(batch)
            source = np.array([names[s] for s in sources.numpy()], dtype=object)
            for path, length in zip(source, lengths.numpy()):
                read_bytes[path] += int(length) + RECORD_OVERHEAD_BYTES
                records[path] += 1
            yield PredictionBatch(source=source, index=index.numpy().astype(np.int64), outputs=outputs)
    for path in paths:
        _check_fully_read(path, sizes[path], read_bytes[path], records[path])


def _record_file_size(path: str) -> int:
    """The file's size; a file too short for one record is refused here, before any prediction."""
    import tensorflow as tf

    size = int(tf.io.gfile.stat(path).length)
    if 0 < size < RECORD_HEADER_BYTES:
        raise DataError(f"{path} is not a TFRecord file: its {size} bytes are fewer than one record's "
                        f"{RECORD_HEADER_BYTES}-byte header. Pass TFRecord files (`tpuestimator data write`, "
                        "tf.io.TFRecordWriter) or JPEG/PNG images (.jpg, .jpeg, .png).", path=path, record=0)
    return size


def _check_fully_read(path: str, size: int, read_bytes: int, records: int) -> None:
    """TensorFlow stops without an error at a partial header after the last record: the bytes
    left over make the file truncated, or not TFRecord at all."""
    left = size - read_bytes
    if left <= 0:
        return
    if records == 0:
        raise DataError(f"{path} is not a TFRecord file: its {size} bytes hold no complete record. Pass TFRecord "
                        "files (`tpuestimator data write`, tf.io.TFRecordWriter) or JPEG/PNG images.",
                        path=path, record=0)
    raise DataError(f"{path} ends with {left} bytes after its last record (record {records - 1}): it was cut "
                    "short while being written, or is not a TFRecord file. Rewrite it, or leave it out.",
                    path=path, record=records)


def _image_batch(predictor: ExportPredictor, paths: Sequence[str]) -> PredictionBatch:
    import tensorflow as tf

    if predictor.takes_image_bytes:
        encoded = [tf.io.gfile.GFile(p, "rb").read() for p in paths]
        try:
            outputs = predictor.run_image_bytes(encoded)
        except tf.errors.InvalidArgumentError:  # decoded in the export's graph: name the file
            from tpuestimator.data.decode import undecodable_image

            bad = undecodable_image(list(paths))
            if bad is None:
                raise
            raise bad from None
    else:
        from tpuestimator.data.decode import decode_image_files
        from tpuestimator.data.spec import image_spec

        image = image_spec(predictor.data_section)
        if not image.height:
            raise ConfigError("FILE", paths[0], "TFRecord files: this export's model does not take images")
        outputs = predictor.run_features({"image": tf.constant(decode_image_files(list(paths), image))})
    return PredictionBatch(source=np.array(list(paths), dtype=object), index=np.zeros(len(paths), dtype=np.int64),
                           outputs=outputs)


def iter_labelled_batches(predictor: ExportPredictor, pattern: str | list[str] | None, *,
                          batch_size: int = 1024) -> Iterator[tuple[np.ndarray, dict]]:
    """(labels int [b], outputs) over the eval pipeline of `pattern` (default the training's
    `data.eval`), through the export's features signature."""
    from tpuestimator import data

    spec = predictor.resolved_data_section(pattern, mode="eval")
    if not spec.eval:
        raise ConfigError("--data", None, "a TFRecord pattern to evaluate on (the export's data section names "
                          "no data.eval)")
    ds = data.client_layout_input(spec, spec.eval, mode="eval", batch_size=batch_size,
                                  num_classes=len(predictor.class_names) or None)()
    with data.translate_errors(spec, "eval"):
        for features, labels in ds:
            yield labels.numpy(), predictor.run_features(features)
