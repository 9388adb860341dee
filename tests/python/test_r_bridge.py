"""The R package's Python module (inst/python/tpuestimatorr_bridge), as R calls it through reticulate.

R sends arrays as the raw bytes of its column-major vectors and reads results back as strict
JSON; the job functions are the core's, reached through the bridge. Tiny data, real TensorFlow.
"""
from __future__ import annotations

import json
import math
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "inst" / "python"))

import tpuestimatorr_bridge as bridge  # noqa: E402


def r_bytes(values, kind: str) -> bytes:
    """What R's writeBin(as.vector(x), raw(), size = 8/4, endian = "little") gives."""
    return struct.pack("<" + ("d" if kind == "double" else "i") * len(values), *values)


def test_to_json_is_strict_json_of_numpy_values_paths_and_bytes(tmp_path):
    value = {
        1: np.float32(0.5),
        "nan": float("nan"),
        "inf": np.float64("inf"),
        "array": np.array([[1.0, np.nan], [3.0, 4.0]], dtype="float32"),
        "ints": (np.int64(3), 4),
        "bytes": b"caf\xc3\xa9",
        "path": tmp_path,
        "other": complex(1, 2),
    }
    out = json.loads(bridge.to_json(value))
    assert out == {"1": 0.5, "nan": None, "inf": None, "array": [[1.0, None], [3.0, 4.0]], "ints": [3, 4],
                   "bytes": "café", "path": str(tmp_path), "other": "(1+2j)"}
    assert "NaN" not in bridge.to_json([math.nan])


def test_to_json_uses_the_core_json_safe():
    from tpuestimator.system import io

    assert bridge.to_json({"a": [float("inf"), np.int32(2)]}) == json.dumps(io.json_safe({"a": [float("inf"), 2]}))


def test_from_json_reads_what_r_writes():
    assert bridge.from_json('{"a":1,"b":[1.5,null],"c":{"d":"x"}}') == {"a": 1, "b": [1.5, None], "c": {"d": "x"}}


def test_array_from_r_keeps_r_indexing():
    # x <- array(as.double(1:24), dim = c(2, 3, 4)): x[i, j, k] == 1 + (i-1) + 2 (j-1) + 6 (k-1)
    a = bridge.array_from_r(r_bytes([float(v) for v in range(1, 25)], "double"), "double", [2, 3, 4], "float32")
    assert a.dtype == np.float32 and a.shape == (2, 3, 4) and a.flags["C_CONTIGUOUS"]
    assert a[1, 2, 3] == 24.0 and a[1, 0, 0] == 2.0 and a[0, 1, 0] == 3.0 and a[0, 0, 1] == 7.0
    b = bridge.array_from_r(r_bytes([1, 0, 1, 1], "integer"), "integer", [2, 2], "int64")
    assert b.dtype == np.int64 and b.tolist() == [[1, 1], [0, 1]]
    with pytest.raises(ValueError, match="`kind` must be one of"):
        bridge.array_from_r(b"", "complex", [0], "float32")
    with pytest.raises(ValueError):
        bridge.array_from_r(r_bytes([1.0, 2.0, 3.0], "double"), "double", [2, 2], "float32")


def test_strings_to_numpy():
    a = bridge.strings_to_numpy(["b", "a", 3])
    assert a.dtype == object and a.tolist() == ["b", "a", "3"]


def test_exception_classes_follow_the_mro():
    from tpuestimator.errors import ConfigError

    names = bridge.exception_classes(ConfigError("train.max_steps", -1, "a positive integer"))
    assert names[0] == "ConfigError" and "TPUEstimatorError" in names and names[-1] == "object"


def test_tpuestimator_version_is_the_core_one():
    import tpuestimator

    assert bridge.tpuestimator_version() == tpuestimator.__version__


def test_a_job_through_the_bridge_as_r_runs_it(tmp_path):
    """write_tfrecords -> run_job (R hook and progress callables) -> result, evaluate, export, predict."""
    import tpuestimator

    rng = np.random.RandomState(0)
    n = 40
    x = rng.randn(n, 2).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    x[:, 0] += np.where(y == 1, 2.0, -2.0)
    manifest = bridge.write_tfrecords({"x": x, "label": y}, str(tmp_path / "records"), split=0.25, seed=1,
                                      label="label", vocabulary=["neg", "pos"])
    assert manifest["vocabulary"] == ["neg", "pos"] and Path(manifest["path"]).is_file()

    events: list[str] = []
    config = {"name": "tab", "model": "linear", "params": {"learning_rate": 0.1},
              "data": {"manifest": manifest["path"]},
              "train": {"batch_size": 8, "max_steps": 10, "iterations_per_loop": 5, "save_checkpoints_steps": 10},
              "eval": {"batch_size": 8}}
    hook = bridge.callable_hook(lambda event, info: events.append(event), name="r_hook_1")
    result = tpuestimator.run_job(bridge.from_json(json.dumps(config)), model_dir=str(tmp_path / "model"),
                                  runs_dir=str(tmp_path / "runs"), hooks=[hook],
                                  progress=lambda event, info: events.append("progress:" + event))
    fields = json.loads(bridge.to_json(bridge.job_result_dict(result)))
    assert {"run_dir", "model_dir", "export_dir", "metrics", "history", "global_step", "config"} <= set(fields)
    assert fields["global_step"] == 10 and math.isfinite(fields["metrics"]["loss"])
    assert fields["config"]["name"] == "tab"
    assert "begin" in events and "after_eval" in events and "progress:loop" in events

    metrics = bridge.evaluate_job(fields["model_dir"])
    assert metrics["loss"] == pytest.approx(fields["metrics"]["loss"], rel=1e-5)
    out = bridge.export_job(fields["model_dir"], str(tmp_path / "lite"), format="tflite")
    assert Path(out).exists()
    rows = bridge.predict(fields["export_dir"], {"x": x[:3]})
    assert len(rows) == 3

    report = bridge.check_report_dict(bridge.check_config(tpuestimator.load_config(config)))
    assert set(report) >= {"ok", "results"} and report["results"]


def test_write_example_writes_a_loadable_config(tmp_path):
    import tpuestimator

    path = bridge.write_example("digits", str(tmp_path / "digits"))
    assert tpuestimator.load_config(path).raw["name"] == "digits"
