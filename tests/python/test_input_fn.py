"""What an input function declares (`tpuestimator.InputFn`): read by the core from the typed value,
and from the attributes earlier versions set on a plain function."""
from __future__ import annotations


def _pairs(skips_itself: bool):
    """An input of 50 batches [0, 1], [2, 3], ... that skips to params["start_step"] itself or not."""
    import tensorflow as tf

    from tpuestimator.core.input_position import batches_before_step

    def fn(params):
        ds = tf.data.Dataset.range(100).batch(2)
        return ds.skip(batches_before_step(params)) if skips_itself else ds
    return fn


def _first_batch(input_fn, start_step: int) -> list[int]:
    from tpuestimator.core.input_position import train_dataset

    ds = train_dataset(input_fn, {"start_step": start_step, "num_replicas": 1, "batch_size": 2})
    return next(iter(ds)).numpy().tolist()


def test_a_resumed_input_is_skipped_once_whoever_declares_the_skip():
    from tpuestimator import InputFn

    # step 3 of one replica starts at batch 3: [6, 7]
    assert _first_batch(InputFn(fn=_pairs(True), skips_to_start_step=True), 3) == [6, 7]
    assert _first_batch(_pairs(False), 3) == [6, 7]  # declares nothing: the Estimator skips
    legacy = _pairs(True)
    legacy.skips_to_start_step = True  # how earlier versions declared it: still honoured
    assert _first_batch(legacy, 3) == [6, 7]
    # undeclared, an input that skips itself is skipped twice: why the declaration exists
    assert _first_batch(_pairs(True), 3) == [12, 13]
    assert _first_batch(InputFn(fn=_pairs(False)), 0) == [0, 1]


def test_the_declarations_are_a_frozen_value_compared_by_identity(fixtures_dir):
    import dataclasses

    import pytest

    from tpuestimator.core.input_fn import InputFn, declarations
    from tpuestimator.data import make_input_fn
    from tpuestimator.data.pipeline import TRANSPOSED_BATCH_AXES

    fn = _pairs(False)
    declared = InputFn(fn=fn, batch_axes={"image": 3})
    with pytest.raises(dataclasses.FrozenInstanceError):
        declared.skips_to_start_step = True
    assert declarations(declared) is declared and declared != InputFn(fn=fn, batch_axes={"image": 3})
    plain = declarations(fn)
    assert (plain.fn, plain.skips_to_start_step, dict(plain.batch_axes), plain.to_model_layout) == (fn, False, {}, None)
    mnist = {"format": "mnist", "train": str(fixtures_dir / "mnist_good.tfrecord"),
             "image": {"height": 8, "width": 8, "channels": 1}, "transpose_input": True}
    built = make_input_fn(mnist, "train")
    assert built.skips_to_start_step and built.mode == "train" and built.data_spec.transpose_input
    assert dict(built.batch_axes) == dict(TRANSPOSED_BATCH_AXES) and callable(built.to_model_layout)
