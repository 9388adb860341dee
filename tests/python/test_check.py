"""`tpuestimator check`: passes on the built-in models, names the op of a data-dependent shape."""
from __future__ import annotations

import pytest

from tpuestimator.jobs.check import check_config


def _digits_config(tmp_path):
    from tpuestimator.examples import write_example

    return write_example("digits", str(tmp_path / "digits"))


@pytest.mark.parametrize("model,extra", [("cnn", {}), ("linear", {}), ("mlp", {"params.hidden_units": "[16]"})])
def test_check_passes_on_builtin_models(tmp_path, model, extra):
    path = _digits_config(tmp_path)
    report = check_config(path, overrides=[f"model={model}"] + [f"{k}={v}" for k, v in extra.items()])
    assert report.ok, report.to_dict()
    names = [r.name for r in report.results]
    assert "training step compiles with XLA" in names and "input shapes are static" in names


def test_check_reports_batch_that_does_not_divide(tmp_path):
    path = _digits_config(tmp_path)
    report = check_config(path, overrides=["train.batch_size=60", "train.iterations_per_loop=100"])
    bad = [r for r in report.failures() if r.field == "train.batch_size"]
    assert bad and "not a multiple of 8" in bad[0].detail and "use 64" in bad[0].detail


def unique_model_fn(params):
    """A model with a data-dependent shape: tf.unique cannot compile for a TPU."""
    import keras
    import tensorflow as tf

    from tpuestimator.models._layers import classifier_loss, image_input
    from tpuestimator.spec import ModelSpec

    class CountDistinct(keras.layers.Layer):
        def call(self, x):
            flat = tf.reshape(tf.cast(x * 4, tf.int32), [-1])
            distinct = tf.unique(flat).y           # shape depends on the data
            return x + tf.cast(tf.size(distinct), x.dtype) * 0.0

    inputs, image = image_input(params)
    x = keras.layers.Flatten()(CountDistinct()(image))
    logits = keras.layers.Dense(params["num_classes"])(x)
    return ModelSpec(model=keras.Model(inputs, logits), loss=classifier_loss(),
                     optimizer=keras.optimizers.Adam(0.01))


def test_check_names_the_op_of_a_data_dependent_shape(tmp_path):
    path = _digits_config(tmp_path)
    report = check_config(path, model_fn=unique_model_fn)
    assert not report.ok
    failed = {r.name: r for r in report.failures()}
    assert "model shapes are static" in failed, report.to_dict()
    assert failed["model shapes are static"].op == "Unique"
    assert "Unique" in failed["model shapes are static"].detail
