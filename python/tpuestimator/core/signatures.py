"""The SavedModel's signatures: `serving_module` wraps a model function's model in a
`tf.Module` with one function per signature; `ServingInput` declares an extra one (raw
inputs and their preprocessing: TPUEstimator's `serving_input_receiver_fn`). The data
signatures a job adds (tf.Example records, image bytes) are built in `tpuestimator.serving`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping
from typing import Any

from tpuestimator.core.tracing import device_function
from tpuestimator.spec import model_inputs
from tpuestimator.system.diskspace import translate_disk_full
from tpuestimator.system.faults import fault_point
from tpuestimator.system.graph_code import as_written, users_graph_code
from tpuestimator.system.io import atomic_directory, atomic_write_json

logger = logging.getLogger(__name__)

# The signatures of an export written by a job (TF Serving calls `serving_default` when a request
# names none): serialized tf.Example records, raw JPEG/PNG bytes (image models), decoded features.
EXAMPLES_SIGNATURE = "serving_default"
IMAGE_BYTES_SIGNATURE = "image_bytes"
FEATURES_SIGNATURE = "features"
# Input names of the first two (the names TF Estimator's parsing receiver and TPUEstimator's
# flowers example used).
EXAMPLES_INPUT = "examples"
IMAGE_BYTES_INPUT = "image_bytes"
# The export's folder of extra files (our metadata, TF Serving's warmup requests).
ASSETS_EXTRA = "assets.extra"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServingInput:
    """One extra signature of an export (TPUEstimator's `serving_input_receiver_fn`).

    Attributes:
      inputs: input name -> `tf.TensorSpec` WITH the batch dimension (None), e.g.
        `{"examples": tf.TensorSpec([None], tf.string)}`.
      preprocess: `dict of those input tensors -> the model's features dict` (as the eval
        input pipeline would have produced them).
    """

    inputs: Mapping[str, Any]
    preprocess: Callable[[Mapping[str, Any]], Mapping[str, Any]]


def serving_module(spec, feature_spec: dict, serving_inputs: Mapping[str, ServingInput] | None = None, *,
                   to_model_layout: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None):
    """A `tf.Module` holding `spec.model`, its `serve` function (the `features` signature:
    `spec.serving_inputs` (default: the features the model was built on), `spec.serving_preprocess`,
    the predictions cast to float32, `class` strings from `spec.class_names`) and one function per
    `serving_inputs` entry (its preprocessing, then `serve`'s model call).

    `module.signatures` maps signature names to the functions to save: `features`, the
    `serving_inputs` names and `serving_default` (the `features` function unless
    `serving_inputs` names one).

    `to_model_layout` (the input function's, e.g. `data.pipeline.transpose_input` under
    `data.transpose_input`) runs in every signature right before the model: clients send the
    natural layout (`[b, h, w, c]` images, records, image bytes) and the model receives exactly
    what evaluation gives it.
    """
    import tensorflow as tf

    inputs = spec.serving_inputs or {name: tf.TensorSpec(shape, tf.as_dtype(dtype), name=name)
                                     for name, (shape, dtype) in feature_spec.items()}
    # a spec's own name wins: a table's columns may hold characters a signature's input cannot
    signature = {name: tf.TensorSpec([None, *s.shape], s.dtype, name=s.name or name) for name, s in inputs.items()}
    class_names = list(spec.class_names) if spec.class_names else None
    module = tf.Module()
    module.model = spec.model
    # a preprocessing that owns lookup tables (a table's `TablePreprocessor.module`, a Keras layer)
    # is tracked, so the export carries the tables its signatures use
    tracked = getattr(spec.serving_preprocess, "module", spec.serving_preprocess)
    if isinstance(tracked, tf.Module):
        module.preprocessing = tracked

    @as_written  # ours; the spec's functions keep AutoGraph (graph_code.users_graph_code)
    def predictions(model_features):
        if to_model_layout is not None:
            model_features = users_graph_code(to_model_layout)(dict(model_features))
        outputs = spec.model(model_inputs(model_features), training=False)
        preds = dict(users_graph_code(spec.predictions)(outputs)) if spec.predictions else {"outputs": outputs}
        preds = {k: tf.cast(v, tf.float32) if v.dtype in (tf.float16, tf.bfloat16) else v for k, v in preds.items()}
        if class_names is not None and "class_id" in preds:
            preds["class"] = tf.gather(tf.constant(class_names), preds["class_id"])
        return preds

    @as_written
    def serve(features):
        return predictions(users_graph_code(spec.serving_preprocess)(features) if spec.serving_preprocess else features)

    module.serve = device_function(serve, input_signature=[signature])
    signatures = {FEATURES_SIGNATURE: module.serve}
    for name, receiver in (serving_inputs or {}).items():
        receiver_signature = {k: tf.TensorSpec(s.shape, s.dtype, name=k) for k, s in receiver.inputs.items()}

        signatures[name] = device_function(_receiver_function(receiver.preprocess, predictions),
                                           input_signature=[receiver_signature])
    signatures.setdefault(EXAMPLES_SIGNATURE, module.serve)
    module.signature_functions = signatures
    return module


def _receiver_function(preprocess, predictions):
    @as_written
    def serve_receiver(raw):
        return predictions(dict(users_graph_code(preprocess)(raw)))
    return serve_receiver


class _RenamingNoteAtDebug(logging.Filter):
    """TensorFlow logs "Function `serve` contains input name(s) table_handle, resource ... will
    be renamed" (through absl) once per traced signature of every save: internal captured
    tensors, nothing for a user to act on. Drops those records and logs the first once per
    save, at debug level, as ours."""

    def __init__(self):
        super().__init__()
        self.noted = False

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad record is not ours to judge
            return True
        if "contains input name(s)" not in text or not text.startswith("Function `"):
            return True
        if not self.noted:
            self.noted = True
            logger.debug("%s", text)
        return False


_TF_LOGGERS = ("absl", "tensorflow")  # TensorFlow 2.21 logs through absl; older ones as "tensorflow"


@contextlib.contextmanager
def _export_folder(export_dir_base: str, final: str, *, model_dir: str, step: int,
                   assets_extra: Mapping[str, Any] | None):
    """The temp folder an export is written into. It appears as `final`, with `assets_extra`
    (file name -> JSON value) under `assets.extra/`, or not at all: a crash or a full disk
    mid-export leaves nothing behind (`DiskFullError` says the checkpoints are unaffected)."""
    kept = f"The partial export was removed; the checkpoints in {model_dir} are unaffected."
    with translate_disk_full(export_dir_base, "SavedModel export", kept=kept), \
            atomic_directory(final) as tmp:
        yield tmp
        for name, value in (assets_extra or {}).items():
            atomic_write_json(os.path.join(tmp, ASSETS_EXTRA, name), value)
        fault_point("in_export", step)


def write_saved_model(module, export_dir_base: str, *, version: int | None, model_dir: str, step: int,
                      assets_extra: Mapping[str, Any] | None = None) -> str:
    """Saves `module` (a `serving_module`) with its signatures as `<export_dir_base>/<version>/`.

    The version defaults to a timestamp in seconds (TF Serving serves the highest); a taken one
    moves to the next free number. The folder appears atomically: a crash or a full disk
    mid-export leaves nothing behind (`DiskFullError` says the checkpoints are unaffected).
    `assets_extra` (file name -> JSON value) goes under `assets.extra/` inside that atomic
    write: the export appears with its metadata.
    """
    import tensorflow as tf

    version = int(time.time()) if version is None else int(version)
    while os.path.exists(os.path.join(export_dir_base, str(version))):
        version += 1
    final = os.path.join(export_dir_base, str(version))
    with _export_folder(export_dir_base, final, model_dir=model_dir, step=step, assets_extra=assets_extra) as tmp:
        renaming = _RenamingNoteAtDebug()
        for name in _TF_LOGGERS:
            logging.getLogger(name).addFilter(renaming)
        try:
            tf.saved_model.save(module, str(tmp), signatures=module.signature_functions)
        finally:
            for name in _TF_LOGGERS:
                logging.getLogger(name).removeFilter(renaming)
    logger.info("exported SavedModel to %s", final)
    return final


def copy_saved_model(source: str, export_dir_base: str, *, version: int, model_dir: str, step: int,
                     assets_extra: Mapping[str, Any] | None = None) -> str:
    """`<export_dir_base>/<version>/` as a copy of the export `source`, which holds the same
    model and weights (an export of the same step in the same training), with `assets_extra`
    written anew; atomic and disk-full-safe as `write_saved_model`. Tracing and saving the
    serving functions again would write the same SavedModel at the cost of a second export
    (about 0.9 CPU s for the digits example's small CNN)."""
    final = os.path.join(export_dir_base, str(int(version)))
    source = os.path.normpath(source)
    with _export_folder(export_dir_base, final, model_dir=model_dir, step=step, assets_extra=assets_extra) as tmp:
        # the source's assets.extra (its metadata, a warmup file written after it) is not copied:
        # the copy holds what a fresh export would
        shutil.copytree(source, tmp, dirs_exist_ok=True,
                        ignore=lambda folder, names: [ASSETS_EXTRA] if folder == source else [])
    logger.info("exported SavedModel to %s (a copy of %s: the same step's weights)", final, source)
    return final
