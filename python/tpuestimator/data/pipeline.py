"""The input pipeline: TFRecord files -> batches of `(features, labels)`.

`make_input_fn(data_section, mode)` returns `input_fn(params)` per docs/ARCHITECTURE.md.
The pipeline lists and shards the files, interleaves `TFRecordDataset`s, caches raw records
(optional), repeats and shuffles (train only: windows of `shuffle_buffer` records permuted
in one op each), batches FIRST and then parses each batch with one vectorised
`tf.io.parse_example` (training with nothing decoded or augmented per image or batch, e.g. a
table: each shuffle window, then cut into batches), decodes (JPEG/PNG per image, in parallel),
checks `data.assertions`, augments (train only), optionally transposes and prefetches. With
`data.service` the training pipeline runs on tf.data service workers (`tpuestimator.data.service`).
"""
from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from tpuestimator.core.input_fn import InputFn
from tpuestimator.core.input_position import batches_before_step
from tpuestimator.data import epochs
from tpuestimator.data import service as data_service
from tpuestimator.data import spec as specs
from tpuestimator.data.assertions import ASSERT_MARKER, LABEL_MARKER, check_assertions  # noqa: F401  (re-exported)
from tpuestimator.data.augment import make_augmenter, make_image_augmenter, position_seed
from tpuestimator.data.decode import (  # noqa: F401  # noqa: F401  (re-exported)
    DECODE_BATCH,
    BatchDecoder,
    list_files,
    make_batch_decoder,
    parse_serialized,
    parse_spec,
)
from tpuestimator.data.diagnose import check_first_record as check_first
from tpuestimator.data.diagnose import register_skipping
from tpuestimator.errors import DataError
from tpuestimator.models.params import DataParams
from tpuestimator.system.graph_code import as_written

log = logging.getLogger(__name__)

MODES = ("train", "eval", "predict")
# Records per element read from each file: interleaving, caching and shuffling handle chunks, not
# single records (25% less CPU per record than record-level interleaving, benchmarks/input_results.md).
_CHUNK = 16
# A window decoded whole (build_dataset: training's shuffle windows, evaluation's runs of as many
# records) is decoded in parts when it is larger than this (records, and bytes of decoded values:
# raw images with a large `data.shuffle_buffer`): the per-call costs are paid off long before,
# and memory and the wait for the first batch stay bounded.
_DECODE_RECORDS = 8192
_DECODE_BYTES = 32 << 20
# An evaluation input of at most this many bytes of records (no JPEG/PNG to decode: raw pixels
# decode to at most 4x their bytes as float32) is kept in memory once read (`InputFn.fits_in_memory`).
IN_MEMORY_EVAL_BYTES = 16 << 20


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class DataInputFn(InputFn):
    """The input function `make_input_fn` returns: an `InputFn` that also carries its data section.

    Attributes:
      data_spec: the resolved `DataSpec` (for `translate_errors` by the caller).
      mode: "train", "eval" or "predict".
    """

    data_spec: specs.DataSpec
    mode: str


def client_layout_input(data_section: Any, files, *, mode: str, batch_size: int,
                        num_classes: int | None = None) -> Callable[[], tf.data.Dataset]:
    """`read()` -> one pass of `(features, labels)` batches of `files` (a pattern or a list),
    decoded as the `mode` input pipeline decodes them but in the CLIENT layout: `transpose_input`
    off, as an export's signatures take their inputs (they apply `transpose_input` themselves).
    For what feeds records to an export: offline evaluation, batch prediction, the TFLite check.
    `read.data_spec` is the resolved `DataSpec`, for `translate_errors`.

    Args:
      data_section: the training's `data` section (or its `DataSpec`).
      mode: "eval" or "predict" (one pass, no shuffle, no augmentation).
    """
    # the files replace the training's own data; a table's raw values, as the signatures take them
    spec = specs.resolve_section(data_section).replace(eval=files, train=None, transpose_input=False, table_raw=True)
    params = {"batch_size": batch_size, "mode": mode, "input_context": None, "seed": 0, "start_step": 0}
    if num_classes:
        params["num_classes"] = num_classes
    input_fn = make_input_fn(spec, mode)
    read = functools.partial(input_fn, params)
    read.data_spec = input_fn.data_spec
    return read


def make_input_fn(data_section: Any, mode: str) -> DataInputFn:
    """Builds `input_fn(params) -> tf.data.Dataset` of `(features, labels)` batches.

    Args:
      data_section: the config's `data` section (`cfg.data`, a dict, or a resolved `DataSpec`;
        a manifest, if named, fills the rest).
      mode: "train", "eval" or "predict".

    Returns:
      a `DataInputFn` (`input_fn(params)`, declaring that it skips to the start step itself and,
      under `data.transpose_input`, its batch axes and `to_model_layout`); `params` holds `batch_size` (per replica), `input_context`
      (`tf.distribute.InputContext` or None), `seed`, `start_step` (train: the stream starts
      at the batch that global step trains on, `tpuestimator.core.input_position`) and optionally
      `num_classes` (used to assert labels are in range when the data names no vocabulary).

    Raises:
      DataError: for a data section that cannot be read (no files, empty files, ...).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    spec = specs.resolve_section(data_section)
    pattern = specs.pattern_for(spec, mode)
    n_classes = specs.num_classes(spec)
    check_assertions(spec)

    def input_fn(params: dict) -> tf.data.Dataset:
        params = dict(params or {})
        batch_size = int(params["batch_size"])
        classes = n_classes if n_classes is not None else DataParams.from_params(params).num_classes
        job = None
        if mode == "train" and spec.service:
            # A resumed run (another start step) reads a new service job; the service keeps
            # no input position, so the exact resume below does not apply to it.
            job = data_service.job_name(spec, pattern=pattern, input_context=params.get("input_context"),
                                        seed=int(params.get("seed") or 0) + int(params.get("start_step") or 0))
        skip = batches_before_step(params) if mode == "train" and job is None else 0
        if skip:
            log.info("resuming the input at step %d: skipping %d batches of records before decoding",
                     int(params["start_step"]), skip)
        # The same seed in every run, resumed or not: exact resume (tpuestimator.core.input_position).
        return build_dataset(spec, mode, pattern, batch_size=batch_size,
                             input_context=params.get("input_context"), seed=int(params.get("seed") or 0),
                             num_classes=classes, skip_batches=skip, service_job=job)

    transposed = bool(spec.transpose_input)  # read by the Estimator: feature spec, model build and export
    return DataInputFn(fn=input_fn, data_spec=spec, mode=mode,
                       skips_to_start_step=True,  # it skips to params["start_step"] itself, before decoding
                       reusable=mode != "train",  # one pass over the resolved files, no shuffle, no service
                       fits_in_memory=mode != "train" and _fits_in_memory(spec, pattern),
                       # stateless shuffles and augmentation keyed by params["seed"]; a service job's
                       # name depends on the input context
                       seeded=mode == "train" and not spec.service,
                       batch_axes=dict(TRANSPOSED_BATCH_AXES) if transposed else {},
                       to_model_layout=transpose_input if transposed else None)



def build_dataset(spec: specs.DataSpec, mode: str, pattern: str | list[str], *, batch_size: int,
                  input_context: Any = None, seed: int = 0, num_classes: int | None = None,
                  check_first_record: bool = True, skip_batches: int = 0,
                  service_job: str | None = None) -> tf.data.Dataset:
    """The dataset `input_fn` returns (see module docstring), from a resolved `spec`.

    Train mode: the stream of batches is a function of `seed` alone, and starts after its
    first `skip_batches` batches (a resumed training), skipped before decoding.

    With `service_job` and `data.service` (`make_input_fn` names a job for training only)
    the pipeline is built here and run on the tf.data service's workers as that job: the
    service, not the input context, splits the data between training processes; with
    `data.service_sharding: off` every worker runs it whole, so its window shuffle (`data.epochs`) draws
    its seeds at run time (each worker its own order).
    """
    train = mode == "train"
    service = spec.service if service_job else None
    unseeded = bool(service) and spec.service_sharding == "off"
    files = list_files(pattern)
    _check_not_empty(files, pattern)
    if check_first_record and tf.executing_eagerly():  # traced for parameter-server workers: checked at the probe
        check_first(spec, files, mode)
    record_shard = None
    if input_context is not None and input_context.num_input_pipelines > 1 and not service:
        n, i = input_context.num_input_pipelines, input_context.input_pipeline_id
        if len(files) >= n:
            files = files[i::n]
        else:
            log.warning("%d files for %d input pipelines: sharding by record (each host reads every file); "
                        "write at least %d shards to shard by file", len(files), n, n)
            record_shard = (n, i)

    buffer = int(spec.read_buffer_mb) * 1024 * 1024
    skip_corrupt = spec.skips_corrupt
    if skip_corrupt:
        register_skipping(files)

    def read(filename):  # chunks of up to _CHUNK records: the per-element costs below are paid per chunk
        records = tf.data.TFRecordDataset(filename, buffer_size=buffer)
        if skip_corrupt:
            records = records.ignore_errors(log_warning=True)
        return records.batch(_CHUNK)

    cycle = max(1, min(int(spec.cycle_length), len(files)))

    def chunks(names):  # the record chunks of these files, read in their order
        if any("://" in f for f in files):  # remote storage: parallel reads hide the latency
            ds = names.interleave(as_written(read), cycle_length=cycle, block_length=1, num_parallel_calls=tf.data.AUTOTUNE,
                                  deterministic=bool(spec.deterministic))
        else:  # local files: a plain round robin over `cycle` files costs a third of the CPU per record
            ds = names.interleave(as_written(read), cycle_length=cycle, block_length=1)
        if record_shard:  # record by record: sharding whole chunks would leave a pipeline empty (and
            # a multi-worker job hanging) whenever the files hold fewer chunks than pipelines
            ds = ds.unbatch().shard(*record_shard).batch(_CHUNK)
        return ds

    if train:  # epoch by epoch, each with its own file order (tpuestimator.data.epochs)
        if spec.cache:  # the first epoch's records, in its order, replayed every epoch
            cached = chunks(epochs.epoch_files(files, seed, 0)).cache()

            def read_epoch(epoch):
                return cached
        else:
            def read_epoch(epoch):
                return chunks(epochs.epoch_files(files, seed, epoch))
        ds = read_epoch(tf.constant(0, tf.int64))
    else:
        ds = chunks(tf.data.Dataset.from_tensor_slices(files))
        if spec.cache:
            ds = ds.cache()

    cache_decoded = bool(spec.cache_decoded)
    image_aug = make_image_augmenter(spec) if train else None  # per image (JPEG/PNG formats)
    batch_aug = make_augmenter(spec) if train else None  # per batch (raw pixel formats)
    decoder = make_batch_decoder(spec, mode, num_classes=num_classes,
                                 image_augment=None if cache_decoded else image_aug)
    shuffle_buffer = int(spec.shuffle_buffer)

    def batched(ds, batch_size):
        static = _static_batch(batch_size) if train else None
        if cache_decoded:  # decode once, then shuffle / augment the decoded images every epoch
            ds = decoder.batches(ds.rebatch(DECODE_BATCH), DECODE_BATCH, drop_remainder=False, batched=True)
            ds = ds.unbatch().cache()
            if train:  # decoded already: skipping costs the shuffle of the landing epoch only
                ds = epochs.shuffled_records(ds, buffer=shuffle_buffer, seed=seed,
                                             skip_records=skip_batches * batch_size)
            if image_aug is not None:
                ds = ds.enumerate(start=skip_batches * batch_size).map(
                    as_written(lambda i, element: ({**element[0],
                                               "image": image_aug(element[0]["image"], 1.0, position_seed(seed, i))},
                                              element[1])),
                    num_parallel_calls=tf.data.AUTOTUNE)
            ds = ds.batch(batch_size, drop_remainder=train)
            if batch_aug is not None:
                ds = ds.enumerate(start=skip_batches).map(
                    as_written(lambda i, element: static(*batch_aug(*element, position_seed(seed, i)))),
                    num_parallel_calls=tf.data.AUTOTUNE)
            elif static is not None:
                ds = ds.map(as_written(static), num_parallel_calls=tf.data.AUTOTUNE)
        else:
            window = epochs.window_size(shuffle_buffer, batch_size)
            if batch_aug is None and not decoder.encoded:
                # Decoded a window at a time (or in parts of one: `decode_part`; evaluation: runs
                # of `window` records in file order), then cut into batches: the same batches, and
                # a table's parse and preprocessing cost about a quarter less CPU per record than
                # batch by batch (their per-call costs paid per window; benchmarks/README.md, Tables).
                if train:
                    windows = epochs.shuffled_windows(read_epoch, window=window, batch_size=batch_size,
                                                      seed=None if unseeded else seed, skip_batches=skip_batches)
                else:
                    windows = ds.rebatch(window, drop_remainder=False)
                decoded = decoder.batches(windows, batch_size, drop_remainder=False, batched=True)
                part = decode_part(decoded.element_spec, window, batch_size)
                if part > batch_size:  # else batch by batch, below
                    if part < window:
                        decoded = decoder.batches((windows if train else ds).rebatch(part, drop_remainder=False),
                                                  batch_size, drop_remainder=False, batched=True)
                    if not train:
                        return decoded.rebatch(batch_size, drop_remainder=False)
                    decoded = epochs.cut_batches(decoded, batch_size)
                    if all(s.shape.is_fully_defined() for s in tf.nest.flatten(decoded.element_spec)):
                        return decoded  # the cut gives static batch shapes already (a table, raw images)
                    return decoded.map(as_written(static), num_parallel_calls=tf.data.AUTOTUNE)
            if train:  # batches of serialized records, positioned without parsing or decoding
                ds = epochs.shuffled_batches(read_epoch, window=window, batch_size=batch_size,
                                             seed=None if unseeded else seed, skip_batches=skip_batches)
            else:
                ds = ds.rebatch(batch_size, drop_remainder=False)
            ds = decoder.batches(ds, batch_size, drop_remainder=train, augment=batch_aug, post=static, batched=True,
                                 seed=seed, first_batch=skip_batches)
        return ds

    options = tf.data.Options()
    options.deterministic = bool(spec.deterministic)
    options.experimental_optimization.map_parallelization = True
    if specs.feature_columns(spec):
        # a table's batches are parsed in parallel by the map already; ParseExample splitting each
        # batch over the intra-op threads too only adds hand-offs (5% less CPU per batch, 2 cores)
        options.threading.max_intra_op_parallelism = 1
    if service:  # the split (module docstring of data.service): decoded, augmented batches of at most
        # WIRE_BYTES from the workers, joined into training batches here
        records, ds = ds, batched(ds, batch_size)
        wire = data_service.wire_batch(ds.element_spec, batch_size)
        if wire != batch_size:
            ds = batched(records, wire)
        ds = data_service.distribute(ds.with_options(options), address=service,
                                     sharding=spec.service_sharding or "dynamic", job=service_job,
                                     compression=spec.service_compression or "none")
        if wire != batch_size:
            ds = ds.rebatch(batch_size, drop_remainder=train)
            if train:
                ds = ds.map(as_written(_static_batch(batch_size)))
    else:
        ds = batched(ds, batch_size)
    if spec.transpose_input:
        ds = ds.map(as_written(_transpose), num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.prefetch(tf.data.AUTOTUNE)
    return ds.with_options(options)


def decode_part(decoded_spec, window: int, batch_size: int) -> int:
    """Records per decode call for windows of `window` records: the whole window, or a
    multiple of `batch_size` keeping a call under `_DECODE_RECORDS` records and `_DECODE_BYTES`
    bytes of decoded values (`decoded_spec`: the decoded element's signature, batch first; the
    record bound alone when a feature's size is not fixed)."""
    per_record = data_service.example_bytes(decoded_spec)
    part = min(window, _DECODE_RECORDS, _DECODE_BYTES // max(1, per_record or 1))
    return window if part >= window else max(batch_size, part // batch_size * batch_size)


def _fits_in_memory(spec: specs.DataSpec, pattern) -> bool:
    """The evaluation files hold at most `IN_MEMORY_EVAL_BYTES` of records and no JPEG/PNG
    images (which decode to many times their size); False when they cannot be listed yet (the
    input function's own call reports that). Stats files only until the bound is passed: a large
    set of remote shards costs one or a few stats here, not one per shard."""
    if spec.format == "flowers" or any(feature.kind in ("jpeg", "png") for feature in
                                       specs.record_features(spec, with_label=False).values()):
        return False
    try:
        files = list_files(pattern)
        total = 0
        for f in files:
            total += tf.io.gfile.stat(f).length
            if total > IN_MEMORY_EVAL_BYTES:
                return False
        return bool(files)
    except (DataError, tf.errors.OpError, OSError):
        return False


def _check_not_empty(files: list[str], pattern) -> None:
    sizes = [tf.io.gfile.stat(f).length for f in files]
    if sum(sizes) == 0:
        raise DataError(f"The files matching {pattern!r} are empty ({len(files)} file(s), 0 bytes): no records "
                        "to read. Rewrite them with `tpuestimator data write`.", path=files[0], record=0)
    for f, size in zip(files, sizes):
        if size == 0:
            log.warning("%s is empty (0 bytes); it contributes no records", f)


def _static_batch(batch_size: int):
    def fixed(v, shape):  # no op where the shape is static already (a table: 21 ops per batch fewer)
        return v if v.shape.is_fully_defined() and v.shape.as_list() == shape else tf.ensure_shape(v, shape)

    def fn(features, labels):
        features = {k: fixed(v, [batch_size] + v.shape[1:].as_list()) for k, v in features.items()}
        return features, fixed(labels, [batch_size])
    return fn


# `data.transpose_input`: the axis of each feature's batch in what the model receives.
TRANSPOSED_BATCH_AXES = {"image": 3}


def transpose_input(features):
    """`data.transpose_input` (TPUEstimator's flowers-example TPU trick): `image` [b, h, w, c] ->
    [h, w, c, b]; the model function transposes back. The eval/train pipeline and every
    signature of an export (serving.serving_module) apply this same function, so serving
    gives the model exactly what evaluation gives it."""
    out = dict(features)
    if "image" in out:
        out["image"] = tf.transpose(out["image"], [1, 2, 3, 0])
    return out


def _transpose(features, labels):
    return transpose_input(features), labels
