"""What an input function declares to the Estimator, as a typed value instead of attributes set
on a function.

`InputFn(fn, skips_to_start_step=..., batch_axes=..., to_model_layout=...)` is the input
function (calling it calls `fn(params)`) and its declarations; the built-in pipeline returns
one (`tpuestimator.data.make_input_fn`, with the data section in `DataInputFn`). A plain
function declares nothing: `declarations(input_fn)` is the one place the core reads them.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

# Attributes earlier versions read off a plain function; still honoured (`declarations`).
_LEGACY_ATTRIBUTES = ("skips_to_start_step", "batch_axes", "to_model_layout")


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class InputFn:
    """An input function `fn(params) -> tf.data.Dataset` and what it declares.

    Attributes:
      fn: the function; `InputFn(...)(params)` calls it.
      skips_to_start_step: `fn` itself skips the `input_position.batches_before_step(params)`
        batches a resumed training already trained on (the built-in pipeline does, before
        decoding); otherwise the Estimator appends `Dataset.skip` (`input_position.train_dataset`).
      batch_axes: {feature: its batch axis} for features whose batch is not on axis 0
        (`data.transpose_input`); the feature spec and the export keep the clients' layout.
      to_model_layout: None, or `features -> features` turning the clients' layout into the
        one `fn` delivers (applied by the export's signatures and to padded eval batches).
      reusable: an evaluation / prediction dataset `fn` returns reads the same examples in the
        same order each time it is iterated, and a call with the same `params` (`start_step`
        aside, which one pass does not read) returns an equal one: the Estimator builds it once
        and iterates it again at each evaluation. The built-in pipeline declares it: rebuilding
        it (tracing its decoding again) cost about 0.07 CPU s an evaluation, a small
        table's training 2.4 of its 11.2 s.
      fits_in_memory: with `reusable`, the decoded examples are small enough to keep in memory:
        an evaluation over the whole input (no `steps`) caches them as it reads them, and the
        next evaluations read no files and decode nothing. The built-in pipeline declares it
        for at most `data.pipeline.IN_MEMORY_EVAL_BYTES` of records without JPEG/PNG images:
        reading and decoding a 12-row table again cost about 40 ms an evaluation, its iteration
        from memory 1.3 ms. Files changed during the job are not read again; a new input
        function (`make_input_fn`) reads them.
      seeded: a training dataset `fn` returns depends on `params` alone, its randomness seeded
        from `params["seed"]` (stateless ops or explicit seeds, none drawn from TensorFlow's
        global seed counter), and it reads a one-pipeline `params["input_context"]` as None:
        a fresh training (start step 0) on one host replica then trains on the dataset the
        model was built from (the Estimator's probe of its element spec) instead of calling
        `fn` again. The built-in pipeline declares it (not under `data.service`): building its
        training input cost about 0.2 CPU s, a fifteenth of a short job.

    Compared by identity: the Estimator keeps a training iterator while the same input
    function is passed again.
    """

    fn: Callable[[dict], Any]
    skips_to_start_step: bool = False
    batch_axes: Mapping[str, int] = dataclasses.field(default_factory=dict)
    to_model_layout: Callable[[dict], dict] | None = None
    reusable: bool = False
    fits_in_memory: bool = False
    seeded: bool = False

    def __call__(self, params: dict):
        return self.fn(params)


def declarations(input_fn: Callable[[dict], Any]) -> InputFn:
    """What `input_fn` declares: itself when it is an `InputFn`; for a plain function, the
    attributes earlier versions set on it (`input_fn.skips_to_start_step = True`, ...), else
    nothing."""
    if isinstance(input_fn, InputFn):
        return input_fn
    legacy = {name: getattr(input_fn, name) for name in _LEGACY_ATTRIBUTES if getattr(input_fn, name, None)}
    return InputFn(fn=input_fn, **legacy)
