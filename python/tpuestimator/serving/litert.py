"""LiteRT / TFLite: converting an export's `features` signature to a `.tflite` file (float or
quantized: dynamic range, float16, full-integer int8 calibrated on training records) and
verifying the file against the SavedModel on evaluation data.

The converter is TensorFlow's own (`tf.lite.TFLiteConverter`), the check runs TensorFlow's
`tf.lite.Interpreter` (its deprecation notice is silenced: the same API lives on in
`ai_edge_litert.interpreter.Interpreter` for devices). Keras 3 variables in a SavedModel are
not frozen by the converter (the .tflite would read uninitialised variables: NaN), so the
numeric outputs are frozen into constants first (`convert_variables_to_constants_v2`).

A table model's export takes raw strings and numbers and looks strings up in the lookup tables
of Keras's StringLookup layers; freezing keeps those tables (they are no variables) and the
converter turns them into TFLite's built-in hash-table ops. Whole numbers are looked up by
comparison with their vocabulary (`table_preprocessing.WholeNumberLookup`), built-in ops too. What TFLite's
built-in ops cannot run (the string hashing of `hashed` and `crossed` columns) is refused by
`table_refusal` before anything is exported, naming the column.

Verification: a classifier's float file: max |p_tflite - p_savedmodel| over the eval set <=
`FLOAT_TOLERANCE`; quantized: the same top-1 class on >= `TOP1_AGREEMENT` of the eval set. A
regressor's (`prediction`): float: max |y_tflite - y_savedmodel| <= `FLOAT_TOLERANCE` times
max(1, |y_savedmodel|) (float32 at the label's scale); quantized: the RMS difference <=
`QUANTIZED_REGRESSION_TOLERANCE` times the spread (std) of the SavedModel's predictions.
"""
from __future__ import annotations

import contextlib
import gc
import logging
import os
import tempfile
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tpuestimator.errors import ConfigError

logger = logging.getLogger(__name__)

QUANTIZE_MODES = ("none", "dynamic", "float16", "int8")
FLOAT_TOLERANCE = 1e-4
TOP1_AGREEMENT = 0.99
QUANTIZED_REGRESSION_TOLERANCE = 0.05
# What the .tflite file returns: a classifier's probabilities and class id (the SavedModel's
# `class` strings stay in its metadata's class names), a regressor's prediction.
OUTPUTS = ("probabilities", "class_id")
REGRESSION_OUTPUTS = ("prediction",)
# Table columns whose preprocessing TFLite's built-in ops do not run: Keras's Hashing and
# HashedCrossing hash with TensorFlow ops (StringToHashBucketFast, SparseCrossHashed), and
# IntegerLookup, left only for a whole-number vocabulary declared with no out-of-vocabulary
# bucket, builds an int64-keyed hash table (TFLite's built-in hash tables map strings). Other
# whole-number vocabularies are compared with the values (`WholeNumberLookup`) and convert.
# With the Select TF ops (the Flex delegate) the converter takes them, but TensorFlow's own
# Python interpreter has no Flex delegate: such a file could not be verified against the
# SavedModel, so it is not written.
UNCONVERTIBLE_COLUMNS = {
    "hashed": "hashes its values (Keras Hashing: TensorFlow's StringToHashBucketFast op)",
    "crossed": "hashes a cross of columns (Keras HashedCrossing: TensorFlow's SparseCrossHashed op)",
    "int64 categorical without an out-of-vocabulary bucket": (
        "looks whole numbers up in an int64-keyed hash table (Keras IntegerLookup, kept for oov_buckets 0; "
        "declare oov_buckets 1 to convert); TFLite's built-in hash tables have string keys"),
}


def table_refusal(columns) -> str | None:
    """Why a table model with these feature columns cannot be a TFLite model, or None when it can.

    Numeric, bucketized, identity and vocabulary (`categorical`, string or whole-number) columns
    convert; `hashed`, `crossed` and whole-number vocabularies with `oov_buckets` 0 do not
    (`UNCONVERTIBLE_COLUMNS`).
    """
    from tpuestimator.models.column_spec import parse_columns

    for name, column in parse_columns(columns).items():
        kind = column.type
        if kind == "categorical" and column.dtype == "int64" and column.cardinality == len(column.vocabulary):
            kind = "int64 categorical without an out-of-vocabulary bucket"
        reason = UNCONVERTIBLE_COLUMNS.get(kind)
        if reason:
            return (f"column {name!r} is {kind}: its preprocessing {reason}, which TFLite's built-in ops do not "
                    "run (with TensorFlow's Select ops the file would need the Flex delegate, which TensorFlow's "
                    "interpreter here lacks, so it could not be verified against the SavedModel)")
    return None


def output_keys(signature) -> tuple[str, ...]:
    """The outputs a `.tflite` file of this `features` signature returns."""
    names = set(signature.structured_outputs)
    if set(OUTPUTS) <= names:
        return OUTPUTS
    if set(REGRESSION_OUTPUTS) <= names:
        return REGRESSION_OUTPUTS
    raise ConfigError("EXPORT_DIR", sorted(names), "an export whose `features` signature returns "
                      "probabilities and class_id (a classifier) or prediction (a regressor)")


def check_quantize(quantize: str | None) -> str:
    """The quantization mode, `none` for None.

    Raises:
      ConfigError: naming the allowed modes.
    """
    mode = "none" if quantize is None else quantize
    if mode not in QUANTIZE_MODES:
        raise ConfigError("quantize", quantize, " | ".join(QUANTIZE_MODES) + " (none: float32; int8: full-integer "
                          "with a representative dataset from the training records)")
    return mode


def tflite_filename(version: int, quantize: str) -> str:
    """`model-VERSION.tflite` (float) or `model-VERSION-MODE.tflite`, VERSION being its SavedModel's."""
    return f"model-{version}.tflite" if quantize == "none" else f"model-{version}-{quantize}.tflite"


def convert(export_dir: str, *, quantize: str = "none",
            representative: Callable[[], Iterable[Mapping[str, Any]]] | None = None) -> bytes:
    """The `.tflite` bytes of an export's `features` signature (outputs `probabilities` and
    `class_id`, or a regressor's `prediction`).

    Args:
      export_dir: a SavedModel written by tpuestimator (it has a `features` signature).
      quantize: one of `QUANTIZE_MODES`.
      representative: for int8: a zero-argument callable yielding dicts feature name -> array
        of ONE example (batch 1), drawn from the training data.
    """
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    mode = check_quantize(quantize)
    if mode == "int8" and representative is None:
        raise ConfigError("representative", None, "a representative dataset (training examples) for int8")
    loaded = tf.saved_model.load(export_dir)  # kept: its signatures reference its variables
    if "features" not in loaded.signatures:
        raise ConfigError("EXPORT_DIR", export_dir, "an export with a `features` signature (exports written before "
                          "tpuestimator had three signatures lack it: export the checkpoint again)")
    features = loaded.signatures["features"]
    specs = dict(features.structured_input_signature[1])
    outputs = output_keys(features)

    @tf.function(input_signature=[{k: tf.TensorSpec(s.shape, s.dtype, name=k) for k, s in specs.items()}])
    def numeric(inputs):
        out = features(**inputs)
        return tuple(out[k] for k in outputs)

    concrete = numeric.get_concrete_function()
    frozen = convert_variables_to_constants_v2(concrete)
    # A table model's lookup tables are no variables: the frozen function still takes their
    # handles as inputs after the features (flattened by name, as `tf.nest` orders a dict).
    captured = {internal.name: external for external, internal in concrete.graph.captures}
    tables = [captured[t.name] for t in frozen.inputs if t.dtype == tf.resource]
    module = tf.Module()
    module.source = loaded  # tracks those tables: the saved module initializes them

    @tf.function(input_signature=[{k: tf.TensorSpec(s.shape, s.dtype, name=k) for k, s in specs.items()}])
    def serve(inputs):
        return dict(zip(outputs, frozen(*tf.nest.flatten(inputs), *tables)))

    module.serve = serve
    with tempfile.TemporaryDirectory() as tmp:
        tf.saved_model.save(module, tmp, signatures={"features": serve})
        converter = tf.lite.TFLiteConverter.from_saved_model(tmp, signature_keys=["features"])
        if mode != "none":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if mode == "float16":
            converter.target_spec.supported_types = [tf.float16]
        if mode == "int8":  # every op in int8 (inputs/outputs stay float32: quantised at the edges)
            converter.representative_dataset = representative
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        with warnings.catch_warnings(), heap_frozen():
            # int8 calibration runs tf.lite.Interpreter: its deprecation notice
            warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated")
            return converter.convert()


@contextlib.contextmanager
def heap_frozen():
    """The caller's heap frozen (`gc.freeze`) for the block, thawed after it.

    TensorFlow's SavedModel converter runs a full `gc.collect()` to free the model it has
    loaded. That collection walks every object of the process: in a process with a large heap
    (an R session through reticulate, a notebook, a server) it was a third to a half of a small
    model's conversion (docs/deploying.md). Frozen, the heap is left out of collections, and
    the collection still frees what the conversion made, the loaded model among it.

    Nothing is frozen where the caller has frozen objects itself: thawing after the block
    would thaw them too. (A freeze another thread makes during the block is thawed with it.)
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def interpreter(content: bytes):
    """A `tf.lite.Interpreter` on `.tflite` bytes (its deprecation notice silenced)."""
    import tensorflow as tf

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tf.lite.Interpreter(model_content=content)


def run(model, features: Mapping[str, Any]) -> dict:
    """Runs a `.tflite` interpreter's `features` signature on one batch (any size)."""
    import numpy as np

    runner = model.get_signature_runner("features")
    return runner(**{k: np.asarray(v) for k, v in features.items()})


def signature_inputs(specs: Mapping[str, Any], batch: Mapping[str, Any]) -> dict:
    """A batch keyed by the signature's input names: a table's columns arrive under their own
    names (`Petal.Length`), which the signature takes as `petal_length` (`input_name`)."""
    from tpuestimator.models.feature_columns import input_name

    return {k if k in specs else input_name(k): v for k, v in batch.items()}


def verify(export_dir: str, content: bytes, batches: Iterable[Mapping[str, Any]], *, quantize: str) -> dict:
    """Compares a `.tflite` model with the SavedModel's `features` signature on `batches`
    (dicts feature name -> array).

    Returns:
      `examples`, `threshold` (what `passed` checks) and `passed`; a classifier's
      `max_abs_diff` (of the probabilities) and `top1_agreement` (fraction with the same class),
      a regressor's `max_abs_diff`, `max_rel_diff` (over max(1, |y|)) and `rms_diff_over_std`
      (of the predictions).
    """
    import numpy as np
    import tensorflow as tf

    loaded = tf.saved_model.load(export_dir)  # kept: its signatures reference its variables
    features = loaded.signatures["features"]
    specs = dict(features.structured_input_signature[1])
    regression = output_keys(features) == REGRESSION_OUTPUTS
    model = interpreter(content)
    n = agree = 0
    max_diff = max_rel = 0.0
    ours_all, ref_all = [], []
    for batch in batches:
        batch = signature_inputs(specs, batch)
        ours = run(model, batch)
        ref = {k: v.numpy() for k, v in features(**{k: tf.constant(v) for k, v in batch.items()}).items()}
        key = "prediction" if regression else "probabilities"
        diff = np.abs(ours[key] - ref[key])
        max_diff = max(max_diff, float(diff.max()) if diff.size else 0.0)
        if regression:
            rel = diff / np.maximum(1.0, np.abs(ref[key]))
            max_rel = max(max_rel, float(rel.max()) if rel.size else 0.0)
            ours_all.append(ours[key])
            ref_all.append(ref[key])
        else:
            agree += int(np.sum(ours["class_id"] == ref["class_id"]))
        n += len(ours[key])
    if n == 0:
        raise ConfigError("data.eval", None, "evaluation records to verify the TFLite model on")
    if regression:
        ours_y, ref_y = np.concatenate(ours_all), np.concatenate(ref_all)
        rms_over_std = float(np.sqrt(np.mean((ours_y - ref_y) ** 2)) / max(float(ref_y.std()), 1e-12))
        report = {"max_rel_diff": max_rel, "rms_diff_over_std": rms_over_std}
        if quantize == "none":
            passed, threshold = max_rel <= FLOAT_TOLERANCE, {"max_rel_diff": FLOAT_TOLERANCE}
        else:
            passed = rms_over_std <= QUANTIZED_REGRESSION_TOLERANCE
            threshold = {"rms_diff_over_std": QUANTIZED_REGRESSION_TOLERANCE}
    else:
        top1 = agree / n
        report = {"top1_agreement": top1}
        if quantize == "none":
            passed, threshold = max_diff <= FLOAT_TOLERANCE, {"max_abs_diff": FLOAT_TOLERANCE}
        else:
            passed, threshold = top1 >= TOP1_AGREEMENT, {"top1_agreement": TOP1_AGREEMENT}
    return {"examples": n, "max_abs_diff": max_diff, **report, "threshold": threshold, "passed": bool(passed)}


def directory_bytes(path: str) -> int:
    """The size of a folder's files (a SavedModel's, to compare with the .tflite)."""
    return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(path) for f in files)


def single_examples(batches: Iterable[Mapping[str, Any]]):
    """Batches -> dicts of one example each (batch 1), as the int8 calibration feeds them."""
    for batch in batches:
        n = len(next(iter(batch.values())))
        for i in range(n):
            yield {k: v[i:i + 1] for k, v in batch.items()}
