"""What a process's first training costs beyond a later one (issue 34 item 9: the first
`tpu_train()` of an R session at most 2x a later one; benchmarks/bench_r_first_call.R).

AutoGraph parses and rewrites each function it converts once per process: ~2 CPU s of a first
table training, for library code with no Python `if`/`for` on a tensor. The library's own graph
code (loops, steps, the table preprocessing, the export's signatures, the summary writer) is
called as written (`system.graph_code.as_written`); a user's loss, metric and prediction
functions are still converted (`users_graph_code`), so a Python `if` on a tensor there works.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from tensorflow.python.autograph.impl import api as autograph_api

from helpers import array_input_fn, make_data


@pytest.fixture
def converted(monkeypatch):
    """The functions AutoGraph converts (or takes from its cache) while the test runs, by
    module and qualified name: a spy that calls through to AutoGraph's own conversion."""
    seen: list[str] = []
    convert = autograph_api._convert_actual

    def spy(entity, program_ctx):
        seen.append(f"{getattr(entity, '__module__', '?')}.{getattr(entity, '__qualname__', entity)}")
        return convert(entity, program_ctx)

    monkeypatch.setattr(autograph_api, "_convert_actual", spy)
    return seen


def test_a_table_training_converts_none_of_the_librarys_own_functions(tmp_path, converted):
    """A table trained (early stopping: evaluations on the held-out rows), evaluated and exported
    traces the input pipeline, the table preprocessing, the train and eval loops and steps, the
    summary writer and the export's signatures: AutoGraph converts none of them."""
    from tpuestimator.tables import train_table

    x = np.arange(1, 41) / 40
    frame = pd.DataFrame({"x": x, "g": ["a", "b"] * 20, "y": 2 * x + 1})
    result = train_table(frame, label="y", model="dnn", out_dir=tmp_path / "t", runs_dir=str(tmp_path / "runs"),
                         config={"train": {"batch_size": 8, "max_steps": 8, "iterations_per_loop": 4},
                                 "eval": {"batch_size": 8}})
    assert result.global_step > 0 and result.export_dir
    assert converted, "the spy saw nothing: AutoGraph's entry point moved (tensorflow.python.autograph.impl.api)"
    ours = [name for name in converted if name.startswith("tpuestimator.")]
    assert not ours, f"converted by AutoGraph: {sorted(set(ours))}"


def test_a_users_functions_keep_autograph_inside_the_librarys_unconverted_steps(tmp_path, converted):
    """A model function's loss, metric function and prediction function with a Python `if` on a
    tensor (legal in a graph only once AutoGraph converts it) train, evaluate and export; the
    values are the ones the `if` gives."""
    import keras

    from tpuestimator import Estimator, ModelSpec, RunConfig

    def model_fn(params):
        inputs = keras.Input((20,), name="x")
        model = keras.Model(inputs, keras.layers.Dense(3)(inputs))
        cross_entropy = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

        def loss(labels, logits):
            per_example = cross_entropy(labels, logits)
            if tf.reduce_sum(per_example) < 0:  # never: cross entropy is not negative
                per_example = -per_example
            return per_example

        def seven(labels, logits):
            if tf.reduce_sum(tf.cast(labels, tf.float32)) >= 0:  # always
                return tf.fill(tf.shape(labels), 7.0)
            return tf.zeros(tf.shape(labels))

        def predictions(logits):
            class_id = tf.argmax(logits, 1, output_type=tf.int32)
            if tf.size(class_id) > 0:
                return {"class_id": class_id}
            return {"class_id": class_id * 0}

        return ModelSpec(model=model, loss=loss, optimizer=keras.optimizers.SGD(0.1),
                         metrics={"seven": seven}, predictions=predictions)

    x, y = make_data(64)
    est = Estimator(model_fn, RunConfig(model_dir=str(tmp_path / "m"), train_batch_size=16, iterations_per_loop=2,
                                        strategy="cpu"))
    est.train(array_input_fn(x, y), max_steps=2)
    metrics = est.evaluate(array_input_fn(x, y))
    assert est.global_step == 2
    assert metrics["seven"] == pytest.approx(7.0)
    assert np.isfinite(metrics["loss"]) and metrics["loss"] > 0
    export = est.export_saved_model(str(tmp_path / "export"))
    served = tf.saved_model.load(export).signatures["features"](x=tf.constant(x[:4]))
    assert served["class_id"].shape == (4,)
    assert any(name.endswith("model_fn.<locals>.loss") for name in converted)
