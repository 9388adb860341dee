"""The input pipeline: TFRecord files -> batches of `(features, labels)`.

`make_input_fn(data_section, mode)` returns `input_fn(params)` per docs/ARCHITECTURE.md.
The pipeline lists and shards the files, interleaves `TFRecordDataset`s, caches raw records
(optional), repeats and shuffles (train only: windows of `shuffle_buffer` records permuted
in one op each), batches FIRST and then parses each batch with one vectorised
`tf.io.parse_example`, decodes (JPEG/PNG per image, in parallel), checks `data.assertions`,
augments (train only), optionally transposes and prefetches. With `data.service` the
training pipeline runs on tf.data service workers (`tpuestimator.data.service`).
"""
from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any

import tensorflow as tf

from tpuestimator.core.input_position import SKIPS_ATTRIBUTE, batches_before_step
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

log = logging.getLogger(__name__)

MODES = ("train", "eval", "predict")
# Records per element read from each file: interleaving, caching and shuffling handle chunks, not
# single records (25% less CPU per record than record-level interleaving, benchmarks/input_results.md).
_CHUNK = 16


def client_layout_input(data_section: Mapping[str, Any], files, *, mode: str, batch_size: int,
                        num_classes: int | None = None) -> Callable[[], tf.data.Dataset]:
    """`read()` -> one pass of `(features, labels)` batches of `files` (a pattern or a list),
    decoded as the `mode` input pipeline decodes them but in the CLIENT layout: `transpose_input`
    off, as an export's signatures take their inputs (they apply `transpose_input` themselves).
    For what feeds records to an export: offline evaluation, batch prediction, the TFLite check.
    `read.data_section` is the resolved section, for `translate_errors`.

    Args:
      data_section: the training's `data` section.
      mode: "eval" or "predict" (one pass, no shuffle, no augmentation).
    """
    section = dict(data_section, eval=files, transpose_input=False)
    section.pop("train", None)  # the files replace the training's own data
    params = {"batch_size": batch_size, "mode": mode, "input_context": None, "seed": 0, "start_step": 0}
    if num_classes:
        params["num_classes"] = num_classes
    input_fn = make_input_fn(section, mode)
    read = functools.partial(input_fn, params)
    read.data_section = input_fn.data_section
    return read


def make_input_fn(data_section: Mapping[str, Any], mode: str) -> Callable[[dict], tf.data.Dataset]:
    """Builds `input_fn(params) -> tf.data.Dataset` of `(features, labels)` batches.

    Args:
      data_section: the config's `data` section (a manifest, if named, fills the rest).
      mode: "train", "eval" or "predict".

    Returns:
      `input_fn(params)`; `params` holds `batch_size` (per replica), `input_context`
      (`tf.distribute.InputContext` or None), `seed`, `start_step` (train: the stream starts
      at the batch that global step trains on, `tpuestimator.core.input_position`) and optionally
      `num_classes` (used to assert labels are in range when the data names no vocabulary).

    Raises:
      DataError: for a data section that cannot be read (no files, empty files, ...).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    section = specs.resolve_section(data_section)
    pattern = specs.pattern_for(section, mode)
    n_classes = specs.num_classes(section)
    check_assertions(section)

    def input_fn(params: dict) -> tf.data.Dataset:
        params = dict(params or {})
        batch_size = int(params["batch_size"])
        classes = n_classes if n_classes is not None else params.get("num_classes")
        job = None
        if mode == "train" and section.get("service"):
            # A resumed run (another start step) reads a new service job; the service keeps
            # no input position, so the exact resume below does not apply to it.
            job = data_service.job_name(section, pattern=pattern, input_context=params.get("input_context"),
                                        seed=int(params.get("seed") or 0) + int(params.get("start_step") or 0))
        skip = batches_before_step(params) if mode == "train" and job is None else 0
        if skip:
            log.info("resuming the input at step %d: skipping %d batches of records before decoding",
                     int(params["start_step"]), skip)
        # The same seed in every run, resumed or not: exact resume (tpuestimator.core.input_position).
        return build_dataset(section, mode, pattern, batch_size=batch_size,
                             input_context=params.get("input_context"), seed=int(params.get("seed") or 0),
                             num_classes=classes, skip_batches=skip, service_job=job)

    input_fn.data_section = section  # for error translation by the caller
    if section.get("transpose_input"):  # read by the Estimator: feature spec, model build and export
        input_fn.to_model_layout = transpose_input
        input_fn.batch_axes = dict(TRANSPOSED_BATCH_AXES)
    input_fn.mode = mode
    setattr(input_fn, SKIPS_ATTRIBUTE, True)  # it skips to params["start_step"] itself, before decoding
    return input_fn


def build_dataset(section: Mapping[str, Any], mode: str, pattern: str | list[str], *, batch_size: int,
                  input_context: Any = None, seed: int = 0, num_classes: int | None = None,
                  check_first_record: bool = True, skip_batches: int = 0,
                  service_job: str | None = None) -> tf.data.Dataset:
    """The dataset `input_fn` returns (see module docstring); `section` must be resolved.

    Train mode: the stream of batches is a function of `seed` alone, and starts after its
    first `skip_batches` batches (a resumed training), skipped before decoding.

    With `service_job` and `data.service` (`make_input_fn` names a job for training only)
    the pipeline is built here and run on the tf.data service's workers as that job: the
    service, not the input context, splits the data between training processes; with
    `data.service_sharding: off` every worker runs it whole, so its window shuffle draws
    its seeds at run time (each worker its own order).
    """
    train = mode == "train"
    service = section.get("service") if service_job else None
    unseeded = bool(service) and section.get("service_sharding") == "off"
    files = list_files(pattern)
    _check_not_empty(files, pattern)
    if check_first_record and tf.executing_eagerly():  # traced for parameter-server workers: checked at the probe
        check_first(section, files, mode)
    record_shard = None
    if input_context is not None and input_context.num_input_pipelines > 1 and not service:
        n, i = input_context.num_input_pipelines, input_context.input_pipeline_id
        if len(files) >= n:
            files = files[i::n]
        else:
            log.warning("%d files for %d input pipelines: sharding by record (each host reads every file); "
                        "write at least %d shards to shard by file", len(files), n, n)
            record_shard = (n, i)

    ds = tf.data.Dataset.from_tensor_slices(files)
    if train and len(files) > 1:
        ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    buffer = int(section["read_buffer_mb"]) * 1024 * 1024
    skip_corrupt = section.get("on_corrupt") == "skip"
    if skip_corrupt:
        register_skipping(files)

    def read(filename):  # chunks of up to _CHUNK records: the per-element costs below are paid per chunk
        records = tf.data.TFRecordDataset(filename, buffer_size=buffer)
        if skip_corrupt:
            records = records.ignore_errors(log_warning=True)
        return records.batch(_CHUNK)

    cycle = max(1, min(int(section["cycle_length"]), len(files)))
    if any("://" in f for f in files):  # remote storage: parallel reads hide the latency
        ds = ds.interleave(read, cycle_length=cycle, block_length=1, num_parallel_calls=tf.data.AUTOTUNE,
                           deterministic=bool(section["deterministic"]))
    else:  # local files: a plain round robin over `cycle` files costs a third of the CPU per record
        ds = ds.interleave(read, cycle_length=cycle, block_length=1)
    if record_shard:  # record by record: sharding whole chunks would leave a pipeline empty (and
        # a multi-worker job hanging) whenever the files hold fewer chunks than pipelines
        ds = ds.unbatch().shard(*record_shard).batch(_CHUNK)
    if section.get("cache"):
        ds = ds.cache()

    cache_decoded = bool(section.get("cache_decoded"))
    image_aug = make_image_augmenter(section) if train else None  # per image (JPEG/PNG formats)
    batch_aug = make_augmenter(section) if train else None  # per batch (raw pixel formats)
    decoder = make_batch_decoder(section, mode, num_classes=num_classes,
                                 image_augment=None if cache_decoded else image_aug)
    shuffle_buffer = int(section["shuffle_buffer"])

    def batched(ds, batch_size):
        static = _static_batch(batch_size) if train else None
        if cache_decoded:  # decode once, then shuffle / augment the decoded images every epoch
            ds = decoder.batches(ds.rebatch(DECODE_BATCH), DECODE_BATCH, drop_remainder=False, batched=True)
            ds = ds.unbatch().cache()
            if train:
                ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat()
                if skip_batches:  # decoded already: skipping costs the shuffle only
                    ds = ds.skip(skip_batches * batch_size)
            if image_aug is not None:
                ds = ds.enumerate(start=skip_batches * batch_size).map(
                    lambda i, element: ({**element[0],
                                         "image": image_aug(element[0]["image"], 1.0, position_seed(seed, i))},
                                        element[1]),
                    num_parallel_calls=tf.data.AUTOTUNE)
            ds = ds.batch(batch_size, drop_remainder=train)
            if batch_aug is not None:
                ds = ds.enumerate(start=skip_batches).map(
                    lambda i, element: static(*batch_aug(*element, position_seed(seed, i))),
                    num_parallel_calls=tf.data.AUTOTUNE)
            elif static is not None:
                ds = ds.map(static, num_parallel_calls=tf.data.AUTOTUNE)
        else:
            if train:
                ds = window_shuffle(ds.repeat(), shuffle_buffer, batch_size, None if unseeded else seed)
                if skip_batches:  # batches of serialized records: skipped without parsing or decoding
                    ds = ds.skip(skip_batches)
            else:
                ds = ds.rebatch(batch_size, drop_remainder=False)
            ds = decoder.batches(ds, batch_size, drop_remainder=train, augment=batch_aug, post=static, batched=True,
                                 seed=seed, first_batch=skip_batches)
        return ds

    options = tf.data.Options()
    options.deterministic = bool(section["deterministic"])
    options.experimental_optimization.map_parallelization = True
    if service:  # the split (module docstring of data.service): decoded, augmented batches of at most
        # WIRE_BYTES from the workers, joined into training batches here
        records, ds = ds, batched(ds, batch_size)
        wire = data_service.wire_batch(ds.element_spec, batch_size)
        if wire != batch_size:
            ds = batched(records, wire)
        ds = data_service.distribute(ds.with_options(options), address=service,
                                     sharding=section.get("service_sharding") or "dynamic", job=service_job,
                                     compression=section.get("service_compression") or "none")
        if wire != batch_size:
            ds = ds.rebatch(batch_size, drop_remainder=train)
            if train:
                ds = ds.map(_static_batch(batch_size))
    else:
        ds = batched(ds, batch_size)
    if section.get("transpose_input"):
        ds = ds.map(_transpose, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.prefetch(tf.data.AUTOTUNE)
    return ds.with_options(options)


def window_shuffle(chunks: tf.data.Dataset, buffer: int, batch_size: int, seed: int | None) -> tf.data.Dataset:
    """Shuffled batches of serialized records from an endless stream of record chunks (1-D string tensors).

    Consecutive windows of `buffer` records (rounded up to a multiple of `batch_size`) are
    each permuted uniformly (stateless, seeded by `seed` and the window index, so the order
    is reproducible even with parallel calls) and cut into batches. Unlike a sliding
    `Dataset.shuffle` buffer, whose per-record work runs on the single input thread, the
    permutation is one vectorised op per window in a parallel map: measured 2.5x the
    records/s of `shuffle(1024)` on 28x28 records (benchmarks/input_results.md). `seed=None`
    draws each window's seed when it runs, so copies of the pipeline (tf.data service
    workers with sharding off) each produce their own order.
    """
    window = max(1, -(-int(buffer) // batch_size)) * batch_size

    def permute(index, block):
        if seed is None:  # op seeds 0, 0: random at run time, not fixed when the graph is built
            seed_t = tf.raw_ops.RandomUniformInt(shape=tf.constant([], tf.int32), minval=tf.constant(0, tf.int64),
                                                 maxval=tf.constant(2**62, tf.int64), seed=0, seed2=0)
        else:
            seed_t = tf.constant(int(seed), tf.int64)
        return tf.random.experimental.stateless_shuffle(block, seed=tf.stack([seed_t, index]))

    ds = chunks.rebatch(window, drop_remainder=True).enumerate()
    ds = ds.map(permute, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.rebatch(batch_size, drop_remainder=True)


def _check_not_empty(files: list[str], pattern) -> None:
    sizes = [tf.io.gfile.stat(f).length for f in files]
    if sum(sizes) == 0:
        raise DataError(f"The files matching {pattern!r} are empty ({len(files)} file(s), 0 bytes): no records "
                        "to read. Rewrite them with `tpuestimator data write`.", path=files[0], record=0)
    for f, size in zip(files, sizes):
        if size == 0:
            log.warning("%s is empty (0 bytes); it contributes no records", f)


def _static_batch(batch_size: int):
    def fn(features, labels):
        features = {k: tf.ensure_shape(v, [batch_size] + v.shape[1:].as_list()) for k, v in features.items()}
        return features, tf.ensure_shape(labels, [batch_size])
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
