"""Input assertions (`data.assertions`) and the label-range check, compiled into the pipeline.

A failing check raises `InvalidArgumentError` inside tf.data with a marked message;
`diagnose.translate_errors` re-scans the files on the host and names the file, the record
index, the feature and the offending values.
"""
from __future__ import annotations

import tensorflow as tf

from tpuestimator.data import spec as specs
from tpuestimator.errors import DataError

ASSERT_MARKER = "tpuestimator data assertion"
LABEL_MARKER = "tpuestimator label range"


def check_assertions(spec: specs.DataSpec) -> None:
    """Checks that every `data.assertions` entry names a feature the model receives.

    Raises:
      DataError: naming the unknown feature and the known ones.
    """
    known = specs.model_features(spec)
    for a in spec.assertions:
        name = a.feature
        if name not in known:
            raise DataError(f"data.assertions: feature {name!r} is not one the model receives "
                            f"({', '.join(known)}); image formats call the image 'image'.", feature=name)
        if known[name][1] == "string" and any(getattr(a, k) is not None for k in ("min", "max", "finite", "non_negative")):
            raise DataError(f"data.assertions: feature {name!r} holds strings; only `shape` can be asserted.",
                            feature=name)


def assert_label_range(labels: tf.Tensor, num_classes: int, offset: int) -> tf.Tensor:
    ok = tf.logical_and(labels >= 0, labels < num_classes)
    check = tf.debugging.Assert(tf.reduce_all(ok), [
        f"{LABEL_MARKER}: labels must lie in [0, {num_classes}) after subtracting data.label_offset={offset}; "
        "offending stored labels:", tf.boolean_mask(labels + offset, tf.logical_not(ok))], summarize=10)
    with tf.control_dependencies([check]):
        return tf.identity(labels)


def apply_assertions(features: dict, assertions: list[specs.Assertion], fmt: str) -> dict:
    out = dict(features)
    for a in assertions:
        name = a.feature
        x = out[name]
        checks = []
        xf = tf.cast(x, tf.float32) if x.dtype != tf.string else None
        flat = tf.reshape(xf, [tf.shape(xf)[0], -1]) if xf is not None else None

        def bad_values(mask, flat=flat):
            return tf.boolean_mask(flat, mask)

        if a.shape is not None:
            want = list(a.shape)
            checks.append(tf.debugging.Assert(
                tf.reduce_all(tf.equal(tf.shape(x)[1:], want)),
                [f"{ASSERT_MARKER}: feature {name!r} shape must be {want}, got", tf.shape(x)[1:]]))
        if flat is not None:
            if a.finite:
                bad = tf.logical_not(tf.math.is_finite(flat))
                checks.append(tf.debugging.Assert(tf.logical_not(tf.reduce_any(bad)), [
                    f"{ASSERT_MARKER}: feature {name!r} must be finite; offending values:", bad_values(bad)],
                    summarize=10))
            lo = a.min if a.min is not None else (0.0 if a.non_negative else None)
            if a.non_negative and a.min is not None:
                lo = max(0.0, float(a.min))
            if lo is not None:
                bad = flat < float(lo)
                checks.append(tf.debugging.Assert(tf.logical_not(tf.reduce_any(bad)), [
                    f"{ASSERT_MARKER}: feature {name!r} must be >= {lo}; offending values:", bad_values(bad)],
                    summarize=10))
            if a.max is not None:
                bad = flat > float(a.max)
                checks.append(tf.debugging.Assert(tf.logical_not(tf.reduce_any(bad)), [
                    f"{ASSERT_MARKER}: feature {name!r} must be <= {a.max}; offending values:", bad_values(bad)],
                    summarize=10))
        if checks:
            with tf.control_dependencies(checks):
                out[name] = tf.identity(x)
    return out
