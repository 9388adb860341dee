"""`tpuestimator data bench`: how fast the input pipeline is, against the raw read rate.

`bench(config)` measures records/s of the configured pipeline alone and of a bare
`TFRecordDataset` read of the same files, and gives advice. `input_wait_share` measures
what share of a training loop's time is spent waiting for the next batch.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import tensorflow as tf

from tpuestimator.data import spec as specs
from tpuestimator.data.inspect import section_for
from tpuestimator.data.pipeline import build_dataset, list_files


def rate(dataset: tf.data.Dataset, *, seconds: float = 3.0, warmup: int = 3,
         count: Callable[[Any], int] | None = None) -> dict[str, float]:
    """Pulls batches for about `seconds` (after `warmup` batches); returns records/s and batches/s."""
    count = count or (lambda b: int(tf.shape(b[1] if isinstance(b, tuple) else b)[0]))
    it = iter(dataset)
    for _ in range(warmup):
        next(it)
    records = batches = 0
    start = time.perf_counter()
    while True:
        b = next(it)
        records += count(b)
        batches += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            break
    return {"records_per_s": records / elapsed, "batches_per_s": batches / elapsed, "seconds": elapsed}


def raw_read_dataset(spec: specs.DataSpec, files: list[str], batch_size: int) -> tf.data.Dataset:
    """The baseline: the same files read as raw bytes (no parsing), batched; parallel reads for remote files."""
    remote = any("://" in f for f in files)
    ds = tf.data.TFRecordDataset(files, buffer_size=int(spec.read_buffer_mb) * 1024 * 1024,
                                 num_parallel_reads=max(1, min(int(spec.cycle_length), len(files))) if remote
                                 else None)
    return ds.repeat().batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


def bench(target: str, *, mode: str = "train", batch_size: int | None = None, seconds: float = 3.0,
          overrides: tuple[str, ...] = ()) -> dict[str, Any]:
    """Measures the pipeline of a config (or manifest / pattern) against the raw read rate.

    Returns:
      {"pipeline": {records_per_s, ...}, "raw_read": {...}, "ratio", "batch_size", "mode", "advice": [...]}.
    """
    spec, pattern = section_for(target, mode=mode, overrides=overrides)
    if batch_size is None:
        batch_size = 128
        if target.endswith((".yaml", ".yml", ".json")) and not target.endswith(specs.MANIFEST_NAME):
            from tpuestimator.config import load_config

            cfg = load_config(target, overrides)
            batch_size = int((cfg.train if mode == "train" else cfg.eval).batch_size)
    files = list_files(pattern)
    ds = build_dataset(spec, mode, pattern, batch_size=batch_size, seed=0,
                       num_classes=specs.num_classes(spec))
    if mode != "train":
        ds = ds.repeat()
    ours = rate(ds, seconds=seconds)
    raw = rate(raw_read_dataset(spec, files, batch_size), seconds=seconds, count=lambda b: int(b.shape[0]))
    ratio = ours["records_per_s"] / raw["records_per_s"]
    total_bytes = sum(tf.io.gfile.stat(f).length for f in files)
    return {"mode": mode, "batch_size": batch_size, "files": len(files), "bytes": total_bytes,
            "pipeline": ours, "raw_read": raw, "ratio": ratio, "advice": advice(spec, ratio, total_bytes, len(files))}


def advice(spec: specs.DataSpec, ratio: float, total_bytes: int, n_files: int) -> list[str]:
    """What would make this pipeline faster, given its rate against the raw read rate."""
    tips = []
    image_decode = spec.format == "flowers" or any(
        f.kind in ("jpeg", "png") for f in specs.record_features(spec, with_label=False).values())
    if ratio >= 0.8:
        tips.append(f"The pipeline runs at {ratio:.0%} of the raw read rate: reading, not parsing, is the limit.")
    elif image_decode:
        tips.append(f"The pipeline runs at {ratio:.0%} of the raw read rate: image decoding dominates.")
        if not spec.cache_decoded and total_bytes < 512 * 2 ** 20:
            tips.append("The data is small: set data.cache_decoded: true to decode each image once.")
        if (spec.image.decode_ratio if spec.image else 1) == 1:
            tips.append("For photos much larger than data.image, set data.image.decode_ratio: 2, 4 or 8 "
                        "(JPEGs decode at reduced size), or write them resized (`data write --image-size`).")
    else:
        tips.append(f"The pipeline runs at {ratio:.0%} of the raw read rate: parsing/decoding dominates; a "
                    "larger batch amortises the per-batch parse.")
    if not spec.cache and total_bytes < 256 * 2 ** 20:
        tips.append(f"The files total {total_bytes / 2 ** 20:.1f} MiB: data.cache: true keeps the raw records "
                    "in memory after the first epoch.")
    if n_files < int(spec.cycle_length) and total_bytes > 64 * 2 ** 20:
        tips.append(f"Only {n_files} file(s): write more shards (`data write --shards`) so reads run in parallel.")
    return tips


def input_wait_share(dataset: tf.data.Dataset, step_fn: Callable[..., Any], *, steps: int = 50,
                     warmup: int = 3) -> dict[str, float]:
    """Share of a training loop's time spent waiting for input: runs `step_fn(*batch)` `steps` times.

    Returns:
      {"wait_s", "step_s", "share"}; a share above ~0.1 means the model waits on the input.
    """
    it = iter(dataset)
    for _ in range(warmup):
        step_fn(*next(it))
    wait = step = 0.0
    for _ in range(steps):
        t0 = time.perf_counter()
        batch = next(it)
        t1 = time.perf_counter()
        out = step_fn(*batch)
        if hasattr(out, "numpy"):
            out.numpy()  # wait for the step itself
        t2 = time.perf_counter()
        wait += t1 - t0
        step += t2 - t1
    return {"wait_s": wait, "step_s": step, "share": wait / max(wait + step, 1e-12)}


def format_report(report: Mapping[str, Any]) -> str:
    """The bench result as text."""
    p, r = report["pipeline"], report["raw_read"]
    lines = [f"mode {report['mode']}, batch {report['batch_size']}, {report['files']} file(s), "
             f"{report['bytes'] / 2 ** 20:.2f} MiB",
             f"pipeline: {p['records_per_s']:,.0f} records/s ({p['batches_per_s']:,.1f} batches/s)",
             f"raw read: {r['records_per_s']:,.0f} records/s",
             f"ratio:    {report['ratio']:.2f}x of the raw read rate"]
    lines += [f"- {t}" for t in report["advice"]]
    return "\n".join(lines)
