"""Small in-memory input functions and model functions for the core tests."""
from __future__ import annotations

import contextlib
import gc
import os
import subprocess
from pathlib import Path

import numpy as np

WITHOUT_SKLEARN = str(Path(__file__).with_name("without_sklearn"))


def make_data(n: int = 1001, dim: int = 20, classes: int = 3, seed: int = 0):
    rng = np.random.RandomState(seed)
    x = rng.randn(n, dim).astype("float32")
    w = rng.randn(dim, classes)
    y = (x @ w).argmax(1).astype("int32")
    return x, y


def array_input_fn(x, y, *, shuffle: bool = False):
    """input_fn(params) over arrays with TPUEstimator's params['batch_size'] semantics."""
    import tensorflow as tf

    def input_fn(params):
        ds = tf.data.Dataset.from_tensor_slices(({"x": x}, y))
        if params["mode"] == "train":
            if shuffle:
                ds = ds.shuffle(len(x), seed=params["seed"])
            ds = ds.repeat()
            ctx = params.get("input_context")
            if ctx is not None and ctx.num_input_pipelines > 1:
                ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
            return ds.batch(params["batch_size"], drop_remainder=True)
        return ds.batch(params["batch_size"])
    return input_fn


def finite_input_fn(x, y):
    """A training input that ends after one pass (no repeat)."""
    import tensorflow as tf

    def input_fn(params):
        ds = tf.data.Dataset.from_tensor_slices(({"x": x}, y))
        return ds.batch(params["batch_size"], drop_remainder=True)
    return input_fn


def one_clear_error(proc: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    """Asserts a CLI run failed with exit `code` and ONE `error: ` line holding each needle, no traceback."""
    err = proc.stderr
    assert proc.returncode == code, proc.stdout[-2000:] + err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, err[-3000:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def without_sklearn(env: dict) -> dict:
    """`env` for a CLI or cluster process that runs as on the core install: scikit-learn (a dev
    extra, for the tests' own answers) hidden, so Keras does not import it (about 2 of the 9-12
    CPU s of a `tpuestimator train` process; without_sklearn/sklearn/__init__.py)."""
    return dict(env, PYTHONPATH=os.pathsep.join([WITHOUT_SKLEARN, env.get("PYTHONPATH", "")]))


@contextlib.contextmanager
def collector_off():
    """The cyclic garbage collector off for the block, after one collection: an object that only
    a reference cycle keeps stays alive there, so a test sees the cycle (a `weakref` to it still
    answers) instead of a collection hiding it."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
