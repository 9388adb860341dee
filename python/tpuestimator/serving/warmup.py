"""TF Serving warmup requests: `assets.extra/tf_serving_warmup_requests` in an export, a TFRecord
file of `tensorflow.serving.PredictionLog` protos that TF Serving replays when it loads the
model (so the first real request does not pay for tracing and memory allocation).

Each request is a `PredictRequest` for the `serving_default` signature holding ONE real
record (serialized `tf.Example`, as the training files store it) in its `examples` input.

The `tensorflow-serving-api` package would pull the full `tensorflow` distribution next to
`tensorflow-cpu`; the four messages needed are declared here instead, in their own descriptor
pool, with the field numbers of tensorflow_serving/apis/{model,predict,prediction_log}.proto
(`TensorProto` is TensorFlow's own), so the bytes are those TF Serving parses.
"""
from __future__ import annotations

import functools
import os
from collections.abc import Iterable

from tpuestimator.errors import ConfigError

WARMUP_FILE = "tf_serving_warmup_requests"
# TF Serving reads at most 1000 warmup records (model_warmup_util.cc: kMaxNumRecords).
MAX_REQUESTS = 1000


@functools.cache
def message_classes() -> dict:
    """`PredictionLog`, `PredictLog`, `PredictRequest`, `ModelSpec` and the pool's `TensorProto` classes."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from tensorflow.core.framework import tensor_pb2

    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(file_descriptor) -> None:  # TensorProto's file and its imports, dependencies first
        if file_descriptor.name in added:
            return
        for dep in file_descriptor.dependencies:
            add(dep)
        proto = descriptor_pb2.FileDescriptorProto()
        file_descriptor.CopyToProto(proto)
        pool.Add(proto)
        added.add(file_descriptor.name)

    add(tensor_pb2.DESCRIPTOR)
    f = descriptor_pb2.FileDescriptorProto(name="tpuestimator/tf_serving_warmup.proto", package="tensorflow.serving",
                                           syntax="proto3", dependency=[tensor_pb2.DESCRIPTOR.name])
    optional, repeated = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL, descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
    string, message = descriptor_pb2.FieldDescriptorProto.TYPE_STRING, descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE

    spec = f.message_type.add(name="ModelSpec")
    spec.field.add(name="name", number=1, label=optional, type=string)
    spec.field.add(name="signature_name", number=3, label=optional, type=string)
    request = f.message_type.add(name="PredictRequest")
    request.field.add(name="model_spec", number=1, label=optional, type=message, type_name=".tensorflow.serving.ModelSpec")
    entry = request.nested_type.add(name="InputsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, label=optional, type=string)
    entry.field.add(name="value", number=2, label=optional, type=message, type_name=".tensorflow.TensorProto")
    request.field.add(name="inputs", number=2, label=repeated, type=message,
                      type_name=".tensorflow.serving.PredictRequest.InputsEntry")
    request.field.add(name="output_filter", number=3, label=repeated, type=string)
    log = f.message_type.add(name="PredictLog")
    log.field.add(name="request", number=1, label=optional, type=message, type_name=".tensorflow.serving.PredictRequest")
    prediction_log = f.message_type.add(name="PredictionLog")
    prediction_log.oneof_decl.add(name="log_type")
    prediction_log.field.add(name="predict_log", number=6, label=optional, type=message,
                             type_name=".tensorflow.serving.PredictLog", oneof_index=0)
    pool.Add(f)
    names = {"PredictionLog": "tensorflow.serving.PredictionLog", "PredictLog": "tensorflow.serving.PredictLog",
             "PredictRequest": "tensorflow.serving.PredictRequest", "ModelSpec": "tensorflow.serving.ModelSpec",
             "TensorProto": "tensorflow.TensorProto"}
    return {k: message_factory.GetMessageClass(pool.FindMessageTypeByName(v)) for k, v in names.items()}


def warmup_path(export_dir: str) -> str:
    return os.path.join(export_dir, "assets.extra", WARMUP_FILE)


def write_warmup_requests(export_dir: str, records: Iterable[bytes], *, model_name: str = "",
                          signature: str = "serving_default", input_name: str = "examples") -> int:
    """Writes one `PredictionLog` per record into `assets.extra/tf_serving_warmup_requests`
    (atomically: a temporary file renamed into place). Returns the number of requests.

    Raises:
      ConfigError: with no record, or more than TF Serving reads (`MAX_REQUESTS`).
    """
    import tensorflow as tf

    records = list(records)
    if not records:
        raise ConfigError("export.warmup", 0, "at least one record to write warmup requests from")
    if len(records) > MAX_REQUESTS:
        raise ConfigError("export.warmup", len(records), f"at most {MAX_REQUESTS} (TF Serving reads no more)")
    classes = message_classes()
    target = warmup_path(export_dir)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = target + ".tmp"
    with tf.io.TFRecordWriter(tmp) as writer:
        for record in records:
            tensor = classes["TensorProto"].FromString(tf.make_tensor_proto([record], dtype=tf.string).SerializeToString())
            request = classes["PredictRequest"](model_spec=classes["ModelSpec"](name=model_name, signature_name=signature))
            request.inputs[input_name].CopyFrom(tensor)
            log = classes["PredictionLog"](predict_log=classes["PredictLog"](request=request))
            writer.write(log.SerializeToString())
    os.replace(tmp, target)
    return len(records)


def sample_records(data_section, n: int) -> list[bytes]:
    """The first `n` serialized records of the eval files (the train files when there are none).

    Raises:
      ConfigError: above `MAX_REQUESTS`, or when the files hold fewer than `n` records.
    """
    import tensorflow as tf

    from tpuestimator.data.decode import list_files
    from tpuestimator.data.spec import pattern_for, resolve_section

    if n > MAX_REQUESTS:
        raise ConfigError("export.warmup", n, f"at most {MAX_REQUESTS} (TF Serving reads no more)")
    files = list_files(pattern_for(resolve_section(data_section), "predict"))
    records = [r.numpy() for r in tf.data.TFRecordDataset(files).take(n)]
    if len(records) < n:
        raise ConfigError("export.warmup", n, f"at most the {len(records)} records of {', '.join(files)}")
    return records


def read_warmup_requests(export_dir: str) -> list[dict]:
    """The requests of an export's warmup file: dicts `model_name`, `signature`, `inputs` (name ->
    list of the request's string values)."""
    import tensorflow as tf

    classes = message_classes()
    out = []
    for raw in tf.data.TFRecordDataset(warmup_path(export_dir)):
        log = classes["PredictionLog"].FromString(raw.numpy())
        request = log.predict_log.request
        inputs = {k: list(v.string_val) for k, v in request.inputs.items()}
        out.append({"model_name": request.model_spec.name, "signature": request.model_spec.signature_name,
                    "inputs": inputs})
    return out
