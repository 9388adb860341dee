"""`tpuestimator check` on a model module still written for TF1: one message per leftover,
each naming its replacement from docs/MIGRATING.md; a ported module passes."""
from __future__ import annotations

import os
import subprocess
import textwrap

TF1_MODULE = '''
import tensorflow.compat.v1 as tf
from tensorflow.compat.v1 import estimator as tf_estimator


def model_fn(features, labels, mode, params):
    y = tf.layers.Conv2D(filters=8, kernel_size=3)(features)
    logits = tf.layers.Dense(10)(tf.layers.Flatten()(y))
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    learning_rate = tf.train.exponential_decay(0.05, tf.train.get_global_step(), 100000, 0.96)
    optimizer = tf.tpu.CrossShardOptimizer(tf.train.GradientDescentOptimizer(learning_rate))
    return tf_estimator.tpu.TPUEstimatorSpec(mode, loss=loss,
                                             train_op=optimizer.minimize(loss, tf.train.get_global_step()))
'''

PORTED_MODULE = '''
import keras

from tpuestimator import ModelSpec


def model_fn(params):
    image = keras.Input((8, 8, 1), name="image")
    logits = keras.layers.Dense(10)(keras.layers.Flatten()(image))
    return ModelSpec(model=keras.Model(image, logits),
                     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None),
                     optimizer=keras.optimizers.SGD(keras.optimizers.schedules.ExponentialDecay(0.05, 100000, 0.96)))
'''


def _check(tmp_path, python_env, python, module_source: str) -> subprocess.CompletedProcess:
    """`tpuestimator check` as a command (its exit code and output as a shell sees them);
    `python`: conftest's forked_python (without the process's TensorFlow import, ~6 CPU s)."""
    from tpuestimator.examples import write_example

    config = write_example("digits", tmp_path / "digits")
    (tmp_path / "user_model.py").write_text(textwrap.dedent(module_source))
    env = dict(python_env, PYTHONPATH=str(tmp_path) + os.pathsep + python_env["PYTHONPATH"])
    return subprocess.run([python, "-m", "tpuestimator.cli", "check", config, "--set", "model=user_model:model_fn",
                           "--cores", "1"], env=env, capture_output=True, text=True, timeout=600)


def test_check_names_each_tf1_leftover_and_its_replacement(tmp_path, python_env, forked_python):
    proc = _check(tmp_path, python_env, forked_python, TF1_MODULE)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    out = proc.stdout
    assert "[FAIL] model module has no TF1 leftovers" in out and "docs/MIGRATING.md" in out
    expected = {
        "line 2: import tensorflow.compat.v1 (tf.compat.v1)": "the TensorFlow 2 API",
        "line 3: from tensorflow.compat.v1 import estimator (tf.estimator)": "tpuestimator.Estimator",
        "line 7: tf.layers.Conv2D (tf.layers)": "keras.layers",
        "line 10: tf.train.get_global_step (tf.train.get_global_step)": "keras.optimizers.schedules",
        "line 11: tf.tpu.CrossShardOptimizer (CrossShardOptimizer)": "the distribution strategy sums",
        "line 12: tf_estimator.tpu.TPUEstimatorSpec (tf.estimator)": "ModelSpec",
    }
    lines = out.splitlines()
    for finding, replacement in expected.items():
        line = next((text for text in lines if finding in text), None)
        assert line is not None, f"{finding!r} not reported:\n{out}"
        assert replacement in line, line
    assert "[FAIL] model function builds" in out   # the TF1 model cannot build; no traceback


def test_a_ported_module_has_no_leftovers(tmp_path, monkeypatch):
    from tpuestimator.jobs.check import tf1_leftovers_check

    (tmp_path / "ported_model.py").write_text(textwrap.dedent(PORTED_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    result = tf1_leftovers_check("ported_model:model_fn")
    assert result.ok, result.detail
    (tmp_path / "tf1_model.py").write_text(textwrap.dedent(TF1_MODULE))
    assert not tf1_leftovers_check("tf1_model:model_fn").ok
    assert tf1_leftovers_check("cnn") is None                # built-in models are not scanned
