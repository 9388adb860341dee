"""Where a resumed training's input starts: exact resume of the input position.

A training input is a deterministic function of `params["seed"]` (the same seed in every
run, never reseeded on resume), so the batch global step k trains on is the same in an
uninterrupted run and in a run resumed from a checkpoint at step s <= k, provided the resumed
input skips the batches steps 0..s-1 consumed. Each global step takes
`num_replicas_in_sync / num_input_pipelines` batches from each input pipeline (one per local
replica; `distribute_datasets_from_function` hands consecutive batches to the replicas).

An input function may skip them itself, more cheaply (the built-in pipeline skips batches of
serialized records before decoding them): it declares so with
`InputFn(fn, skips_to_start_step=True)` (`tpuestimator.core.input_fn`) and reads
`batches_before_step(params)`. For any other
input function `train_dataset` appends `Dataset.skip`, which costs reading (and decoding)
the skipped batches once on resume.

Randomness inside the input (augmentation) must then be keyed by the position in the stream,
not drawn from stateful random ops (see `tpuestimator.data.augment`); the model's own random
state (dropout) is in the checkpoint (`tpuestimator.core.state`).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from tpuestimator.core.input_fn import declarations

logger = logging.getLogger(__name__)

def batches_before_step(params: Mapping[str, Any]) -> int:
    """How many batches this input pipeline delivered before global step `params["start_step"]`.

    With `params["input_context"]` (a `tf.distribute.InputContext`) each step takes
    `num_replicas_in_sync // num_input_pipelines` batches; without one, one batch per replica
    (`params["num_replicas"]`, the host replay's view of the whole input).
    """
    start = int(params.get("start_step") or 0)
    if start <= 0:
        return 0
    ctx = params.get("input_context")
    if ctx is not None:
        per_step = max(1, int(ctx.num_replicas_in_sync) // max(1, int(ctx.num_input_pipelines)))
    else:
        per_step = max(1, int(params.get("num_replicas") or 1))
    return start * per_step


def train_dataset(input_fn: Callable[[dict], Any], params: dict):
    """`input_fn(params)` positioned at `params["start_step"]`: skipped by the input function
    itself when it declares `InputFn.skips_to_start_step`, else by `Dataset.skip` here.

    A finite input (no `repeat`: one pass per `train` call, TPUEstimator's epoch-per-call
    pattern) of known length is positioned within its pass (`skip % length`), so each call
    still reads a whole pass; one of unknown length starts from its beginning (logged).
    """
    import tensorflow as tf

    ds = input_fn(params)
    skip = batches_before_step(params)
    if not skip or declarations(input_fn).skips_to_start_step:
        return ds
    length = int(ds.cardinality().numpy())
    if length == tf.data.UNKNOWN_CARDINALITY:
        logger.info("a finite training input of unknown length starts from its beginning at step %d", params["start_step"])
        return ds
    if length != tf.data.INFINITE_CARDINALITY:
        skip = skip % length if length > 0 else 0
    if skip:
        logger.info("resuming the input at step %d: skipping the %d batches already trained on", params["start_step"],
                    skip)
        ds = ds.skip(skip)
    return ds
