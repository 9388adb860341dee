"""Debugger V2 dumps limited to steps a..b, and check-numerics mode, through the config's `debug` section."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    from tpuestimator.examples import write_example

    return write_example("digits", tmp_path_factory.mktemp("digits"))


def _job(digits, tmp_path, *overrides, hooks=()):
    from tpuestimator.jobs.job import run_job

    return run_job(digits, overrides=["model=linear", "train.batch_size=16", "eval.every_n_steps=null",
                                      "export.enabled=false", f"run.model_dir={tmp_path / 'model'}", *overrides],
                   record=False, hooks=hooks)


def test_dump_of_steps_5_to_7_of_a_20_step_run_holds_those_steps_only(digits, tmp_path, capsys):
    from tensorflow.python.debug.lib import debug_events_reader

    from tpuestimator.debug.dumps import summarize_dump

    loops = []
    dump_dir = tmp_path / "dump"
    result = _job(digits, tmp_path, "train.max_steps=20", "train.iterations_per_loop=10",
                  f"debug.dump={{dir: {dump_dir}, mode: FULL_HEALTH, steps: [5, 7]}}",
                  hooks=[lambda event, info: loops.append((info["step"] - info["steps"], info["step"]))
                         if event == "after_loop" else None])
    assert result.global_step == 20
    # The outer loop ran shorter loops around the window: one device call per dumped step.
    assert loops == [(0, 4), (4, 5), (5, 6), (6, 7), (7, 17), (17, 20)]
    with debug_events_reader.DebugDataReader(str(dump_dir)) as reader:
        reader.update()
        executions = reader.executions()
        loop_calls = [e for e in executions if e.op_type.startswith("__inference_loop")]
        traces = reader.graph_execution_traces()
    # Steps 5, 6 and 7 only: three executions of the train loop (of 6 loops run), each
    # reading one batch and computing one gradient of the linear model's bias.
    assert len(loop_calls) == 3
    assert len(traces) > 0
    assert sum(t.op_type in ("IteratorGetNext", "OptionalGetValue") for t in traces) == 3
    assert sum(t.op_type == "BiasAddGrad" for t in traces) == 3
    summary = summarize_dump(str(dump_dir))
    assert summary["loop_executions"] == 3 and summary["nonfinite"] == []
    # ... and the CLI's summary of it.
    import json

    from tpuestimator.cli import main

    capsys.readouterr()
    assert main(["debug", "dump", str(dump_dir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["loop_executions"] == 3


def test_debug_command_imports_no_tensorflow(python_env):
    import subprocess
    import sys

    code = ("import sys, tpuestimator.cli as c; c.build_parser(); import tpuestimator.commands.debug, "
            "tpuestimator.debug, tpuestimator.hooks; print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], env=python_env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_dump_dir_holding_an_old_dump_is_refused(digits, tmp_path):
    from tpuestimator.errors import ConfigError

    old = tmp_path / "dump"
    old.mkdir()
    (old / "tfdbg_events.1.host.metadata").write_bytes(b"")
    with pytest.raises(ConfigError, match="debug.dump.dir"):
        _job(digits, tmp_path, "train.max_steps=4", f"debug.dump={{dir: {old}, steps: [2, 3]}}")


def test_check_numerics_mode_names_the_op_and_is_switched_off_after(digits, tmp_path):
    import numpy as np
    import tensorflow as tf

    from tpuestimator.errors import NonFiniteError

    with pytest.raises(NonFiniteError) as info:
        _job(digits, tmp_path, "model=mlp", "params.learning_rate=1.0e+10",
             "params.hidden_units=[32, 32]", "train.max_steps=20", "train.iterations_per_loop=5",
             "debug.check_numerics=true")
    op = info.value.op
    assert op["op_type"] and op["op_name"] and op["kind"] in ("NaN", "Inf", "-Inf")
    assert op["op_name"] in str(info.value)

    @tf.function
    def log(x):
        return tf.math.log(x)

    assert np.isnan(log(tf.constant(-1.0)).numpy())  # no check-numerics error: the mode is off again


@pytest.mark.quick("debug")
def test_parse_eager_and_graph_check_numerics_errors():
    import tensorflow as tf

    from tpuestimator.debug.numerics import parse_check_numerics_error

    @tf.function
    def graph_fn(x):
        return tf.math.log(x) * 2.0  # graph op

    tf.debugging.enable_check_numerics()
    try:
        with pytest.raises(tf.errors.InvalidArgumentError) as graph_err:
            graph_fn(tf.constant([-1.0, 1.0]))
        with pytest.raises(tf.errors.InvalidArgumentError) as eager_err:
            tf.math.sqrt(tf.constant([-4.0]))
    finally:
        tf.debugging.disable_check_numerics()
    graph = parse_check_numerics_error(str(graph_err.value))
    assert graph["op_type"] == "Log" and graph["op_name"].endswith("Log") and graph["kind"] == "NaN"
    assert graph["graph"] == "graph_fn" and graph["user_source"]["file"] == __file__
    eager = parse_check_numerics_error(str(eager_err.value))
    assert eager["op_type"] == "Sqrt" and eager["kind"] == "NaN" and eager["eager"]
    assert parse_check_numerics_error("some other error") is None
