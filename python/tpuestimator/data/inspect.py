"""`tpuestimator data inspect`: what a set of TFRecord files holds.

Finds the feature spec (from a config's data section, a manifest.json beside the files, or
by sniffing the first record), counts records per file and per class, decodes a few
examples and, for images, writes a PNG grid of samples with their labels.
"""
from __future__ import annotations

import collections
import dataclasses
import io
import logging
import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from tpuestimator.data import spec as specs
from tpuestimator.data.diagnose import check_example, iter_records
from tpuestimator.data.pipeline import build_dataset, list_files
from tpuestimator.errors import DataError
from tpuestimator.system.io import atomic_write_bytes

log = logging.getLogger(__name__)


def section_for(target: str, *, mode: str = "train", overrides: tuple[str, ...] = ()) -> tuple[specs.DataSpec, str]:
    """(resolved `DataSpec`, pattern) for a config file, a manifest, or a file pattern."""
    if target.endswith((".yaml", ".yml", ".json")) and os.path.isfile(target) and not target.endswith(specs.MANIFEST_NAME):
        from tpuestimator.config import load_config

        spec = specs.resolve_section(load_config(target, overrides).data)
        return spec, specs.pattern_for(spec, mode)
    if target.endswith(specs.MANIFEST_NAME) or os.path.isdir(target):
        spec = specs.resolve_section({"manifest": target})
        return spec, specs.pattern_for(spec, mode)
    files = list_files(target)
    manifest = os.path.join(os.path.dirname(files[0]), specs.MANIFEST_NAME)
    if os.path.exists(manifest):
        spec = specs.resolve_section({"manifest": manifest, "train": target, "eval": target})
    else:
        spec = specs.resolve_section({**sniff_section(files), "train": target, "eval": target})
    return spec, target


def sniff_section(files: list[str]) -> dict:
    """Guesses a data section from the first record (the MNIST and flowers formats first, else typed features)."""
    for path in files:
        for _, rec, err in iter_records(path):
            if err is not None:
                break
            feats = tf.train.Example.FromString(rec).features.feature
            if specs.MNIST_IMAGE_KEY in feats and specs.MNIST_LABEL_KEY in feats:
                n = len(feats[specs.MNIST_IMAGE_KEY].bytes_list.value[0])
                side = int(round(math.sqrt(n)))
                channels = 1
                if side * side != n and n % 3 == 0 and int(round(math.sqrt(n // 3))) ** 2 == n // 3:
                    side, channels = int(round(math.sqrt(n // 3))), 3
                if side * side * channels != n:
                    raise DataError(f"{path}: image_raw holds {n} bytes, not a square image; write a config with "
                                    "data.image {height, width, channels} and inspect the config.", path=path)
                return {"format": "mnist", "image": {"height": side, "width": side, "channels": channels}}
            if specs.FLOWERS_IMAGE_KEY in feats:
                img = tf.io.decode_image(feats[specs.FLOWERS_IMAGE_KEY].bytes_list.value[0], expand_animations=False)
                return {"format": "flowers", "image": {"height": int(img.shape[0]), "width": int(img.shape[1]),
                                                       "channels": 3}}
            features, label = {}, None
            for name, feat in sorted(feats.items()):
                kind = feat.WhichOneof("kind")
                values = getattr(feat, kind).value
                dtype = {"float_list": "float32", "int64_list": "int64", "bytes_list": "string"}[kind]
                if name in ("label", "labels", "y") and dtype == "int64" and len(values) == 1:
                    label = name
                    continue
                features[name] = {"dtype": dtype, "shape": [] if len(values) == 1 else [len(values)]}
            out = {"format": "features", "features": features}
            if label:
                out["label"] = label
            return out
    raise DataError(f"{files[0]}: no readable record to infer the format from; pass a config instead.",
                    path=files[0])


def inspect(target: str, *, n: int = 8, grid_path: str | None = None, mode: str = "train",
            overrides: tuple[str, ...] = ()) -> dict[str, Any]:
    """Summarises the records of a config's split, a manifest, or a file pattern.

    Returns:
      {"format", "pattern", "spec" (record features), "model_features", "files" {path: count},
      "records", "class_counts", "corrupt" {path: first bad index}, "problems" [first mismatch],
      "vocabulary", "examples" [{label, class, features summary}], "grid" (PNG path or None)}.
    """
    spec, pattern = section_for(target, mode=mode, overrides=overrides)
    files = list_files(pattern)
    vocab = specs.vocabulary(spec)
    offset = int(spec.label_offset)
    label_key = spec.label
    report: dict[str, Any] = {
        "format": spec.format, "pattern": pattern if isinstance(pattern, str) else list(pattern),
        "spec": {name: f.as_dict() for name, f in specs.record_features(spec).items()}, "model_features": {
            k: {"shape": list(s), "dtype": d} for k, (s, d) in specs.model_features(spec).items()},
        "vocabulary": vocab, "files": {}, "records": 0, "class_counts": {}, "corrupt": {}, "problems": []}
    counts: collections.Counter = collections.Counter()
    for path in files:
        k = 0
        for i, rec, err in iter_records(path):
            if err is not None:
                report["corrupt"][path] = i
                break
            k += 1
            ex = tf.train.Example.FromString(rec)
            if len(report["problems"]) < 3:
                problem = check_example(spec, ex, "predict")
                if problem:
                    report["problems"].append({"file": path, "record": i, "feature": problem[0], "problem": problem[1]})
            if label_key and label_key in ex.features.feature:
                values = ex.features.feature[label_key].int64_list.value
                if values:
                    counts[int(values[0]) - offset] += 1
        report["files"][path] = k
        report["records"] += k
    report["class_counts"] = {(_class_name(vocab, c)): counts[c] for c in sorted(counts)}
    report["examples"], images, labels = _examples(spec, pattern, n) if not report["problems"] else ([], None, None)
    report["grid"] = None
    if images is not None and grid_path:
        report["grid"] = write_grid(images, labels, vocab, grid_path)
    return report


def _class_name(vocab, c: int) -> str:
    return vocab[c] if vocab and 0 <= c < len(vocab) else str(c)


def _examples(spec: specs.DataSpec, pattern, n: int):
    local = spec.replace(assertions=(), image=dataclasses.replace(spec.image, scale="unit") if spec.image else None)
    ds = build_dataset(local, "predict", pattern, batch_size=max(1, n), check_first_record=False)
    vocab = specs.vocabulary(spec)
    try:
        features, labels = next(iter(ds))
    except (tf.errors.OpError, StopIteration) as exc:
        log.warning("could not decode examples: %s", exc)
        return [], None, None
    out = []
    for i in range(int(labels.shape[0])):
        summary = {}
        for name, value in features.items():
            v = value[i].numpy()
            if v.dtype == object:
                summary[name] = v.decode(errors="replace") if isinstance(v, bytes) else str(v)
            elif v.size <= 8:
                summary[name] = np.round(v.astype(float), 4).tolist()
            else:
                summary[name] = {"shape": list(v.shape), "min": round(float(v.min()), 4),
                                 "max": round(float(v.max()), 4), "mean": round(float(v.mean()), 4)}
        lab = int(labels[i])
        out.append({"label": lab, "class": _class_name(vocab, lab) if lab >= 0 else None, "features": summary})
    images = features.get("image")
    if images is None:
        images = next((v for v in features.values() if v.dtype == tf.float32 and len(v.shape) == 4), None)
    return out, (images.numpy() if images is not None else None), labels.numpy()


def write_grid(images: np.ndarray, labels: np.ndarray, vocab, path: str, *, cell: int = 96) -> str:
    """Writes images ([n, h, w, c] in [0, 1]) as a PNG grid with each label under its image."""
    from PIL import Image, ImageDraw

    n = len(images)
    cols = min(n, 8)
    rows = int(math.ceil(n / cols))
    text_h = 14
    grid = Image.new("RGB", (cols * cell, rows * (cell + text_h)), "white")
    draw = ImageDraw.Draw(grid)
    for i, img in enumerate(images):
        arr = (np.clip(img, 0, 1) * 255).astype(np.uint8)
        pil = Image.fromarray(arr[..., 0] if arr.shape[-1] == 1 else arr).convert("RGB")
        scale = cell / max(pil.width, pil.height)
        pil = pil.resize((max(1, int(pil.width * scale)), max(1, int(pil.height * scale))), Image.NEAREST)
        x, y = (i % cols) * cell, (i // cols) * (cell + text_h)
        grid.paste(pil, (x, y))
        lab = int(labels[i])
        draw.text((x + 2, y + cell), f"{lab}: {_class_name(vocab, lab)}"[:16], fill="black")
    buffer = io.BytesIO()
    grid.save(buffer, "PNG")
    atomic_write_bytes(path, buffer.getvalue())
    return path


def format_report(report: Mapping[str, Any]) -> str:
    """The report as text for the terminal."""
    lines = [f"format: {report['format']}    pattern: {report['pattern']}", "record features:"]
    for name, s in report["spec"].items():
        lines.append(f"  {name}: {s['dtype']} {s['shape']}" + (f" ({s['kind']})" if s.get("kind") else ""))
    lines.append("model receives:")
    for name, s in report["model_features"].items():
        lines.append(f"  {name}: {s['dtype']} {s['shape']}")
    lines.append(f"records: {report['records']} in {len(report['files'])} file(s)")
    for path, k in report["files"].items():
        lines.append(f"  {path}: {k}" + (f"  CORRUPT from record {report['corrupt'][path]}" if path in report["corrupt"] else ""))
    if report["class_counts"]:
        lines.append("classes: " + ", ".join(f"{c}={k}" for c, k in report["class_counts"].items()))
    for p in report["problems"]:
        lines.append(f"PROBLEM {p['file']} record {p['record']}: {p['problem']}")
    for i, ex in enumerate(report["examples"]):
        lines.append(f"example {i}: label {ex['label']} ({ex['class']}) {ex['features']}")
    if report.get("grid"):
        lines.append(f"sample grid: {report['grid']}")
    return "\n".join(lines)
