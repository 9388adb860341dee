"""`export_savedmodel(export_dir_base, serving_input_receiver_fn)` as export signatures.

TF1's `serving_input_receiver_fn()` built placeholders and a preprocessing graph and returned
`tf.estimator.export.ServingInputReceiver(features, receiver_tensors)`. TensorFlow 2 has no
placeholders; a signature is a traced function of its inputs. `serving_input(fn)` keeps the
TF1 function as it is, with two names changed (`tf.placeholder` -> `porting.placeholder`,
`tf.estimator.export.ServingInputReceiver` -> `porting.ServingInputReceiver`): it is called
once to learn the inputs (each placeholder's dtype, shape and receiver name), then traced
again inside the signature with each placeholder standing for its input. The result is a
`serving.ServingInput`, which `Estimator.export_saved_model(base, serving_inputs={name: ...})`
exports as a signature of that name (`serving_default` replaces the default one):

    estimator.export_saved_model(base, serving_inputs={"serving_default": serving_input(serving_input_fn)})

`build_raw_serving_input_receiver_fn(features)` and
`build_parsing_serving_input_receiver_fn(feature_spec)` are TF1's two ready-made receivers.
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from typing import Any

from tpuestimator.core.signatures import ServingInput
from tpuestimator.errors import ModelFnError

SINGLE_RECEIVER_NAME = "input"   # TF1's name for a receiver tensor that is not a dict
SINGLE_FEATURE_NAME = "x"        # spec.split_element's name for a features tensor that is not a dict

_recording = threading.local()


class ServingInputReceiver:
    """TF1's `ServingInputReceiver(features, receiver_tensors)`: what a receiver function returns."""

    def __init__(self, features, receiver_tensors, receiver_tensors_alternatives=None):
        if receiver_tensors_alternatives:
            raise ModelFnError("ServingInputReceiver(receiver_tensors_alternatives=...) has no equivalent: export each "
                               "alternative as its own signature (serving_inputs={name: serving_input(fn), ...}).")
        self.features = features
        self.receiver_tensors = receiver_tensors


TensorServingInputReceiver = ServingInputReceiver  # TF1's variant with a single features tensor


def placeholder(dtype, shape=None, name=None):
    """`tf.compat.v1.placeholder` inside a receiver function given to `serving_input`."""
    session = getattr(_recording, "session", None)
    if session is None:
        raise RuntimeError("porting.placeholder only works inside a receiver function given to "
                           "porting.serving_input(...); TensorFlow 2 has no placeholders elsewhere.")
    return session.placeholder(dtype, shape, name)


class _Recording:
    """One call of a receiver function: creates the placeholders (the discovery call, in a
    scratch graph) or hands out the signature's input tensors in the same order."""

    def __init__(self, inputs: list | None = None):
        self.inputs = inputs
        self.created: list = []   # the discovery call's placeholder tensors, in call order

    def placeholder(self, dtype, shape, name):
        import tensorflow as tf

        if self.inputs is None:
            tensor = tf.compat.v1.placeholder(tf.as_dtype(dtype), shape, name=name)
            self.created.append(tensor)
            return tensor
        i = len(self.created)
        self.created.append(None)
        if i >= len(self.inputs):
            raise ModelFnError("the receiver function created more placeholders in the signature than when first "
                               "called: it must build the same inputs every time.")
        return self.inputs[i]


@contextlib.contextmanager
def _recording_session(session: _Recording):
    previous = getattr(_recording, "session", None)
    _recording.session = session
    try:
        yield session
    finally:
        _recording.session = previous


def serving_input(receiver_fn: Callable[[], ServingInputReceiver]) -> ServingInput:
    """A TF1 `serving_input_receiver_fn` (with the two names changed) as a `serving.ServingInput`.

    Raises:
      ModelFnError: it returns something other than a `ServingInputReceiver`, or a receiver
        tensor that is not one of its placeholders.
    """
    import tensorflow as tf

    discovery = _Recording()
    with tf.Graph().as_default(), _recording_session(discovery):
        receiver = receiver_fn()
        if not isinstance(receiver, ServingInputReceiver):
            raise ModelFnError(f"{getattr(receiver_fn, '__name__', 'receiver_fn')} must return "
                               f"porting.ServingInputReceiver. Received: {type(receiver).__name__}")
        receivers = receiver.receiver_tensors
        if not isinstance(receivers, Mapping):
            receivers = {SINGLE_RECEIVER_NAME: receivers}
        order: dict[int, str] = {}
        for key, tensor in receivers.items():
            index = next((i for i, p in enumerate(discovery.created) if p is tensor), None)
            if index is None:
                raise ModelFnError(f"receiver tensor {key!r} is not a porting.placeholder of the receiver function: "
                                   "receiver_tensors must be the placeholders themselves.")
            order[index] = key
        specs = {}
        for index, tensor in enumerate(discovery.created):
            if index not in order:
                raise ModelFnError(f"placeholder {tensor.name} of the receiver function is not among its "
                                   "receiver_tensors; every input of the signature must be a receiver tensor.")
            specs[order[index]] = tf.TensorSpec(tensor.shape, tensor.dtype, name=order[index])
    keys_in_order = [order[i] for i in range(len(discovery.created))]

    def preprocess(raw: Mapping[str, Any]) -> dict:
        replay = _Recording([raw[key] for key in keys_in_order])
        with _recording_session(replay):
            features = receiver_fn().features
        return dict(features) if isinstance(features, Mapping) else {SINGLE_FEATURE_NAME: features}

    return ServingInput(inputs=specs, preprocess=preprocess)


def build_raw_serving_input_receiver_fn(features: Mapping[str, Any], default_batch_size: int | None = None):
    """TF1's raw receiver: the signature takes the features themselves.

    `features` maps names to `tf.TensorSpec`s, or to anything with `shape` (WITH the batch
    dimension) and `dtype` (a TF1 placeholder's description); the batch becomes
    `default_batch_size` (None: free).
    """
    import tensorflow as tf

    def receiver_fn():
        inputs = {}
        for name, like in features.items():
            shape = list(like.shape)
            inputs[name] = placeholder(tf.as_dtype(like.dtype), [default_batch_size, *shape[1:]], name=name)
        return ServingInputReceiver(dict(inputs), dict(inputs))
    return receiver_fn


def build_parsing_serving_input_receiver_fn(feature_spec: Mapping[str, Any], default_batch_size: int | None = None):
    """TF1's parsing receiver: the signature takes serialized `tf.Example`s (input `examples`)
    and parses them with `feature_spec` (`tf.io.FixedLenFeature`, ...)."""
    import tensorflow as tf

    def receiver_fn():
        serialized = placeholder(tf.string, [default_batch_size], name="input_example_tensor")
        parsed = tf.io.parse_example(serialized, dict(feature_spec))
        return ServingInputReceiver(parsed, {"examples": serialized})
    return receiver_fn
