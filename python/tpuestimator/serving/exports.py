"""Serving: the export's data signatures (`data_serving_inputs`: the tf.Example and
raw-image-bytes ones of a data section, built on `core.signatures`), the export's metadata
(`write_export_metadata`, read back by `load_export`), running a signature of an export on a
batch (`open_export(path).run(name, batch)`) and prediction with an export (`predict`: raw
inputs — TFRecord files read with the training data's format, image files, arrays — into
its `features` signature).

The CLI's `tpuestimator predict` and R's `predict()` call `predict`.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tpuestimator.core.signatures import (
    EXAMPLES_INPUT,
    EXAMPLES_SIGNATURE,
    FEATURES_SIGNATURE,
    IMAGE_BYTES_INPUT,
    IMAGE_BYTES_SIGNATURE,
    ServingInput,
)
from tpuestimator.errors import ConfigError
from tpuestimator.serving.export_info import (  # noqa: F401  (EXPORT_META: its importers' old home)
    EXPORT_META,
    ExportInfo,
    TableInfo,
    export_info_path,
    read_export_info,
    write_export_info,
)
from tpuestimator.system.graph_code import as_written


def data_serving_inputs(data_section: Any) -> dict[str, ServingInput]:
    """The signatures a job's export gets from its `data` section, applying exactly the eval
    input pipeline's decoding (data/decode.py): `serving_default` takes serialized `tf.Example`
    records as the training files hold them (input `examples`), `image_bytes` (image models only)
    a batch of JPEG/PNG strings (input `image_bytes`)."""
    import tensorflow as tf

    from tpuestimator.data import decode
    from tpuestimator.data.spec import resolve_section

    spec = resolve_section(data_section)
    out = {EXAMPLES_SIGNATURE: ServingInput(
        inputs={EXAMPLES_INPUT: tf.TensorSpec([None], tf.string)},
        preprocess=as_written(lambda raw: decode.parse_serialized(spec, raw[EXAMPLES_INPUT])))}
    if decode.image_input(spec) is not None:
        out[IMAGE_BYTES_SIGNATURE] = ServingInput(
            inputs={IMAGE_BYTES_INPUT: tf.TensorSpec([None], tf.string)},
            preprocess=as_written(lambda raw: decode.image_bytes_features(spec, raw[IMAGE_BYTES_INPUT])))
    return out


def write_export_metadata(export_dir: str, cfg, estimator) -> None:
    """Writes `assets.extra/tpuestimator.json` (data section, classes, features) into an export,
    so `tpuestimator predict EXPORT FILE...` can read raw files the way training did.

    Args:
      export_dir: the SavedModel folder.
      cfg: the job's `JobConfig`.
      estimator: the Estimator that exported it (built: its spec and feature spec are read).
    """
    write_export_info(export_dir, export_info(cfg, estimator))


def export_info(cfg, estimator) -> ExportInfo:
    """The `ExportInfo` of an export of `estimator` at its current step."""
    from tpuestimator.config_sections import section_as_written
    from tpuestimator.data.spec import resolve_section
    from tpuestimator.models.column_spec import columns_as_dicts

    spec = resolve_section(cfg.data)
    table = None
    if spec.feature_columns:  # a table: what its raw values are (predict_table, evaluate)
        table = TableInfo(feature_columns=columns_as_dicts(spec.feature_columns), task=spec.task,
                          label=spec.label)
    # the file holds the config's data section as written, resolved again where it is read
    return ExportInfo(data=section_as_written(cfg.data), class_names=tuple(estimator.spec.class_names or ()),
                      feature_spec={k: (tuple(s), d) for k, (s, d) in estimator.feature_spec.items()},
                      model=cfg.model, global_step=estimator.global_step, table=table)


def export_metadata(cfg, estimator) -> dict:
    """What `write_export_metadata` writes, as the file's dict (exporters pass it as
    `Estimator.export_saved_model(assets_extra=)`: the export appears with it)."""
    return export_info(cfg, estimator).to_dict()


def load_export(export_dir: str):
    """(loaded SavedModel, `ExportInfo`) of an export written by tpuestimator (an empty
    `ExportInfo` when it has no metadata)."""
    import tensorflow as tf

    loaded = tf.saved_model.load(export_dir)
    return loaded, read_export_info(export_dir) or ExportInfo()


def is_export_dir(path: str | os.PathLike) -> bool:
    """True for a SavedModel folder written by tpuestimator (saved_model.pb + its metadata)."""
    path = Path(path)
    return (path / "saved_model.pb").is_file() and export_info_path(path).is_file()


# Which export a model dir means when none is named: the final export before the best one
# before any other (latest, or a custom exporter's), the highest version first in each.
_EXPORT_RANK = ("final", "best")


def resolve_export_dir(path: str) -> str:
    """A SavedModel folder: `path` itself, the `export/` folder of a run folder, or, for a
    model dir (or any folder holding exports), its newest final export, else its newest best
    one, else its newest other one. The one answer to "which export does this folder mean"
    for the command line and R (`tpu_predict()` of a run or model dir).

    Raises:
      ConfigError: when no SavedModel is there.
    """
    path = str(path)
    root = Path(path)
    if (root / "saved_model.pb").exists():
        return path
    if (root / "export" / "saved_model.pb").exists():  # a run folder's copy of its export
        return str(root / "export")
    found = [pb.parent for pb in root.rglob("saved_model.pb")] if root.is_dir() else []
    if not found:
        raise ConfigError("EXPORT_DIR", path, "a SavedModel folder (holding saved_model.pb) written by "
                          "`tpuestimator train` or `tpuestimator export`, or a folder holding one")

    def rank(folder: Path) -> tuple:
        parts = folder.relative_to(root).parts
        kind = next((i for i, name in enumerate(_EXPORT_RANK) if name in parts), len(_EXPORT_RANK))
        version = int(folder.name) if folder.name.isdigit() else -1
        return (kind, -version, str(folder))

    return str(min(found, key=rank))


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoadedExport:
    """An export loaded for prediction (`open_export`).

    Attributes:
      path: the SavedModel folder.
      saved_model: what `tf.saved_model.load` returned.
      info: its `assets.extra/tpuestimator.json` (data section, class names, feature spec), an
        empty `ExportInfo` if absent.
    """

    path: str
    saved_model: Any
    info: ExportInfo

    @property
    def signature_names(self) -> list[str]:
        return sorted(self.saved_model.signatures.keys())

    def signature(self, name: str = EXAMPLES_SIGNATURE):
        """The concrete function of a signature (keyword inputs, dict of tensors out)."""
        if name not in self.saved_model.signatures:
            raise ConfigError("signature", name, f"one of the export's signatures: {', '.join(self.signature_names)}")
        return self.saved_model.signatures[name]

    def input_specs(self, name: str = EXAMPLES_SIGNATURE) -> dict:
        """Input name -> `tf.TensorSpec` (batch dimension None) of a signature."""
        return dict(self.signature(name).structured_input_signature[1])

    def run(self, name: str, inputs) -> dict:
        """Runs signature `name` on ONE batch and returns numpy arrays (`class` as str).

        `inputs`: a dict input name -> array-like (any batch size), or, for a signature with one
        input (`serving_default`: serialized tf.Example records; `image_bytes`: JPEG/PNG strings),
        the batch itself (a list of bytes or an array).
        """
        import numpy as np

        specs = self.input_specs(name)
        if not isinstance(inputs, Mapping):
            if len(specs) != 1:
                raise ConfigError("inputs", type(inputs).__name__, f"a dict with the inputs {sorted(specs)}")
            inputs = {next(iter(specs)): inputs}
        if set(specs) - set(inputs):
            # TensorFlow names a signature's inputs as `input_name` does (a table's `Petal.Length`
            # is `petal_length`): the columns' own names are accepted too
            from tpuestimator.models.feature_columns import input_name

            inputs = {**{input_name(k): v for k, v in inputs.items()}, **inputs}
        missing = sorted(set(specs) - set(inputs))
        if missing:
            raise ConfigError("inputs", sorted(inputs), f"the signature {name!r} takes {sorted(specs)}")
        tensors = {k: _input_tensor(name, k, inputs[k], specs[k]) for k in specs}
        out = {}
        for key, value in self.signature(name)(**tensors).items():
            array = value.numpy()
            if array.dtype == object:
                array = np.asarray([v.decode() if isinstance(v, bytes) else v for v in array.ravel()],
                                   dtype=object).reshape(array.shape)
            out[key] = array
        return out


def _input_tensor(signature: str, key: str, value, spec):
    """One input of a signature as a tensor of its spec's dtype and shape; a value that is not is
    refused naming the input, what it got and what the signature takes (TensorFlow's own error is
    about binding a concrete function's arguments)."""
    import numpy as np
    import tensorflow as tf

    dims = spec.shape.as_list() if spec.shape.rank is not None else None
    wanted = ("any shape" if dims is None else _batch_shape_text(dims[1:]) if dims and dims[0] is None
              else f"shape {tuple(dims)}")  # a scalar or a fixed batch: as it is
    try:
        tensor = tf.convert_to_tensor(np.asarray(value) if spec.dtype != tf.string else value, dtype=spec.dtype)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"inputs.{key}", f"{type(value).__name__} ({exc})",
                          f"values of dtype {spec.dtype.name}, {wanted}, for the signature {signature!r}") from None
    if not spec.shape.is_compatible_with(tensor.shape):
        raise ConfigError(f"inputs.{key}", f"an array of shape {tuple(tensor.shape)}",
                          f"{wanted} for the signature {signature!r}: one row per example")
    return tensor


def open_export(export_dir: str) -> LoadedExport:
    """Loads an export (or a run folder's `export/`) to run its signatures on batches:
    `open_export(path).run("serving_default", [record_bytes, ...])`,
    `.run("image_bytes", [jpeg_bytes, ...])`, `.run("features", {"image": array})`."""
    path = resolve_export_dir(export_dir)
    loaded, info = load_export(path)
    return LoadedExport(path=path, saved_model=loaded, info=info)


def predict(export_dir: str, inputs, *, batch_size: int = 256) -> list[dict]:
    """Predicts with an exported SavedModel (its `features` signature, or `serving_default` in
    exports older than the three signatures).

    Args:
      export_dir: the export (or a run folder holding `export/`).
      inputs: TFRecord file paths (read with the training data's format), image files
        (JPEG/PNG, for image models), or a dict of arrays / an array for the serving inputs.

    Returns:
      one dict per example (numpy values; `class` as str).
    """
    export = open_export(export_dir)
    signature = FEATURES_SIGNATURE if FEATURES_SIGNATURE in export.signature_names else EXAMPLES_SIGNATURE
    feature_arrays = predict_inputs(inputs, export.info)
    check_predict_shapes(feature_arrays, export.info.feature_spec)
    n = len(next(iter(feature_arrays.values())))
    out: list[dict] = []
    for start in range(0, n, batch_size):
        arrays = export.run(signature, {k: v[start:start + batch_size] for k, v in feature_arrays.items()})
        for i in range(len(next(iter(arrays.values())))):
            out.append({k: v[i] for k, v in arrays.items()})
    return out


def _batch_shape_text(example_dims) -> str:
    """`shape (n, 8, 8, 1)`: a batch of examples of these dimensions (None: any size)."""
    return f"shape ({', '.join(['n', *('any' if d is None else str(d) for d in example_dims)])})"


def check_predict_shapes(arrays: dict, spec: Mapping) -> None:
    """A wrongly shaped input must be an error naming the feature, not a crash inside TensorFlow."""
    for name, (shape, _dtype) in spec.items():
        if name not in arrays:
            raise ConfigError("inputs", sorted(arrays), f"a value for every feature the model takes: {sorted(spec)}")
        got = tuple(arrays[name].shape)
        if len(got) != len(shape) + 1 or tuple(got[1:]) != tuple(shape):
            raise ConfigError(f"inputs.{name}", f"an array of shape {got}",
                              f"{_batch_shape_text(shape)}: one row per example")


def predict_inputs(inputs, info: ExportInfo) -> dict:
    import numpy as np

    spec = info.feature_spec
    if isinstance(inputs, Mapping):
        return {k: np.asarray(v, dtype=spec.get(k, [None, "float32"])[1]) for k, v in inputs.items()}
    if hasattr(inputs, "shape"):
        if len(spec) != 1:
            raise ConfigError("inputs", type(inputs).__name__, f"a dict of arrays for the features {sorted(spec)}")
        name, (_, dtype) = next(iter(spec.items()))
        return {name: np.asarray(inputs, dtype=dtype)}
    files = [str(p) for p in ([inputs] if isinstance(inputs, (str, os.PathLike)) else inputs)]
    for f in files:
        if not os.path.exists(f):
            raise ConfigError("FILE", f, "an existing TFRecord or image file")
    images = [f for f in files if f.lower().endswith((".jpg", ".jpeg", ".png"))]
    if images:
        from tpuestimator.data.decode import decode_image_files
        from tpuestimator.data.spec import image_spec

        return {"image": decode_image_files(images, image_spec(dict(info.data) or None))}
    from tpuestimator import data

    read = data.client_layout_input(dict(info.data), files, mode="predict", batch_size=256)
    columns: dict[str, list] = {}
    with data.translate_errors(read.data_spec, "predict"):  # a bad file is named with its record
        for element in read():
            features = element[0] if isinstance(element, tuple) else element
            for k, v in features.items():
                columns.setdefault(k, []).append(v.numpy())
    return {k: np.concatenate(v) for k, v in columns.items()}
