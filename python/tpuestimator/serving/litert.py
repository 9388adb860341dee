"""LiteRT / TFLite: converting an export's `features` signature to a `.tflite` file (float or
quantized: dynamic range, float16, full-integer int8 calibrated on training records) and
verifying the file against the SavedModel on evaluation data.

The converter is TensorFlow's own (`tf.lite.TFLiteConverter`), the check runs TensorFlow's
`tf.lite.Interpreter` (its deprecation notice is silenced: the same API lives on in
`ai_edge_litert.interpreter.Interpreter` for devices). Keras 3 variables in a SavedModel are
not frozen by the converter (the .tflite would read uninitialised variables: NaN), so the
numeric outputs are frozen into constants first (`convert_variables_to_constants_v2`).

Verification: float: max |p_tflite - p_savedmodel| over the eval set <= `FLOAT_TOLERANCE`;
quantized: the same top-1 class on >= `TOP1_AGREEMENT` of the eval set.
"""
from __future__ import annotations

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
# What the .tflite file returns (the SavedModel's `class` strings stay in its metadata's class names).
OUTPUTS = ("probabilities", "class_id")


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
    """The `.tflite` bytes of an export's `features` signature (outputs `probabilities`, `class_id`).

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

    @tf.function(input_signature=[{k: tf.TensorSpec(s.shape, s.dtype, name=k) for k, s in specs.items()}])
    def numeric(inputs):
        out = features(**inputs)
        return tuple(out[k] for k in OUTPUTS)

    frozen = convert_variables_to_constants_v2(numeric.get_concrete_function())
    module = tf.Module()

    @tf.function(input_signature=[{k: tf.TensorSpec(s.shape, s.dtype, name=k) for k, s in specs.items()}])
    def serve(inputs):
        return dict(zip(OUTPUTS, frozen(**inputs)))

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
        with warnings.catch_warnings():  # int8 calibration runs tf.lite.Interpreter: its deprecation notice
            warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated")
            return converter.convert()


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


def verify(export_dir: str, content: bytes, batches: Iterable[Mapping[str, Any]], *, quantize: str) -> dict:
    """Compares a `.tflite` model with the SavedModel's `features` signature on `batches`
    (dicts feature name -> array).

    Returns:
      `examples`, `max_abs_diff` (of the probabilities), `top1_agreement` (fraction with the same
      class), `threshold` (what `passed` checks: the float tolerance or the top-1 agreement).
    """
    import numpy as np
    import tensorflow as tf

    loaded = tf.saved_model.load(export_dir)  # kept: its signatures reference its variables
    features = loaded.signatures["features"]
    model = interpreter(content)
    n = agree = 0
    max_diff = 0.0
    for batch in batches:
        ours = run(model, batch)
        ref = features(**{k: tf.constant(v) for k, v in batch.items()})
        diff = np.abs(ours["probabilities"] - ref["probabilities"].numpy())
        max_diff = max(max_diff, float(diff.max()) if diff.size else 0.0)
        agree += int(np.sum(ours["class_id"] == ref["class_id"].numpy()))
        n += len(ours["class_id"])
    if n == 0:
        raise ConfigError("data.eval", None, "evaluation records to verify the TFLite model on")
    top1 = agree / n
    if quantize == "none":
        passed, threshold = max_diff <= FLOAT_TOLERANCE, {"max_abs_diff": FLOAT_TOLERANCE}
    else:
        passed, threshold = top1 >= TOP1_AGREEMENT, {"top1_agreement": TOP1_AGREEMENT}
    return {"examples": n, "max_abs_diff": max_diff, "top1_agreement": top1, "threshold": threshold,
            "passed": bool(passed)}


def directory_bytes(path: str) -> int:
    """The size of a folder's files (a SavedModel's, to compare with the .tflite)."""
    return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(path) for f in files)


def single_examples(batches: Iterable[Mapping[str, Any]]):
    """Batches -> dicts of one example each (batch 1), as the int8 calibration feeds them."""
    for batch in batches:
        n = len(next(iter(batch.values())))
        for i in range(n):
            yield {k: v[i:i + 1] for k, v in batch.items()}
