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


# ---- Ctrl-C under reticulate (interrupts.py) ---------------------------------------------------

# Run in a fresh Python: libR loaded (RTLD_GLOBAL, as R's own executable has it; R itself is not
# started: the two flags are plain ints) and reticulate's real rpytools.signals handler installed
# with a stand-in for its R callback that answers from R's flags as R's py_interrupts_pending does.
RETICULATE_SIGNALS_CASE = r"""
import ctypes, os, signal, sys, time, weakref
r_home = sys.argv[1]
ctypes.CDLL(os.path.join(r_home, "lib", "libR.so"), mode=os.RTLD_GLOBAL)
sys.path.insert(0, os.path.join(sys.argv[2], "python"))  # reticulate's rpytools
sys.path.insert(0, sys.argv[3])  # the bridge
import rpytools.signals
from tpuestimatorr_bridge import interrupts

flags = interrupts.r_interrupt_flags()
asked = []

def py_interrupts_pending(reset):  # what reticulate's R callback does (R code, in R)
    asked.append(reset)
    if flags.suspended:
        return False
    if reset:
        flags.pending = False
        return False
    return flags.pending

rpytools.signals.initialize(py_interrupts_pending)
out = {}
with interrupts.r_interrupts_held():
    out["suspended_inside"] = flags.suspended
    # R did not take the Ctrl-C (pending): Python raises it and clears R's flag, asking no R code
    flags.pending = True
    try:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):
            pass
        out["raised_when_pending"] = False
    except KeyboardInterrupt:
        out["raised_when_pending"] = True
    out["pending_after"] = flags.pending
    # R took it (inside an R callback, which raises it there): Python lets it go
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(1000):
        pass
    out["r_asked_inside"] = list(asked)
    # A Ctrl-C while the core starts a child process (sigint_held): R's flag stays set, nothing
    # is raised inside, reticulate's handler stays in place; raised when the block ends
    from tpuestimator.system.processes import sigint_held
    try:
        with sigint_held():
            flags.pending = True
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                pass
            out["held_inside"] = flags.pending
            out["handler_kept"] = signal.getsignal(signal.SIGINT) is rpytools.signals._signal_handler
        out["raised_at_hold_end"] = False
    except KeyboardInterrupt:
        out["raised_at_hold_end"] = True
    out["pending_after_hold"] = flags.pending
    # inside an R callback's allowInterrupts (R's interrupts allowed): Python code that R runs
    # there leaves the Ctrl-C to R, whose flag stays set
    flags.suspended, flags.pending = False, True
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(1000):
        pass
    out["left_to_r_in_callback"] = flags.pending
    flags.suspended, flags.pending = True, False
    # Python's handler running inside a weakref callback (a finalizer here), where a
    # KeyboardInterrupt is only printed: the Ctrl-C is sent again and lands in the job's code
    class Dropped:
        pass
    def finalizer():
        flags.pending = True
        os.kill(os.getpid(), signal.SIGINT)
        [i for i in range(10)]  # Python code: the handler runs here and its raise is lost
    dropped = Dropped()
    weakref.finalize(dropped, finalizer)
    try:
        del dropped
        for _ in range(100):  # the job's code, which lets other threads run (as TensorFlow's ops do)
            time.sleep(0.01)
        out["raised_after_finalizer"] = False
    except KeyboardInterrupt:
        out["raised_after_finalizer"] = True
out["unraisable_hook_restored"] = sys.unraisablehook is sys.__unraisablehook__
out["suspended_after"] = flags.suspended
out["callback_restored"] = rpytools.signals._callback is py_interrupts_pending
# R code that suspended interrupts itself keeps them suspended: the bridge leaves all as it is
flags.suspended = True
with interrupts.r_interrupts_held():
    out["left_alone"] = rpytools.signals._callback is py_interrupts_pending
flags.suspended = False
print(out)
"""


def _r_home_and_reticulate() -> tuple[str, str]:
    """R's home and the installed reticulate's folder, asked of R itself ("" where missing)."""
    import shutil
    import subprocess

    rscript = shutil.which("Rscript")
    if rscript is None:
        return "", ""
    out = subprocess.run([rscript, "-e", 'cat(R.home(), system.file(package = "reticulate"), sep = "\\n")'],
                         capture_output=True, text=True, check=True, timeout=120).stdout.splitlines()
    return out[0], (out[1] if len(out) > 1 else "")


def test_r_interrupts_held_takes_ctrl_c_from_r_flags_without_running_r_code():
    import ast
    import subprocess

    r_home, reticulate = _r_home_and_reticulate()
    if not r_home or not (Path(r_home) / "lib" / "libR.so").is_file():
        pytest.skip("R with a shared libR.so is not installed (scripts/setup_system.sh r)")
    if not reticulate:
        pytest.skip("R's reticulate is not installed (scripts/setup_system.sh r)")
    bridge_dir = Path(__file__).resolve().parents[2] / "inst" / "python"
    proc = subprocess.run([sys.executable, "-c", RETICULATE_SIGNALS_CASE, r_home, reticulate, str(bridge_dir)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    assert out == {"suspended_inside": True, "raised_when_pending": True, "pending_after": False,
                   "r_asked_inside": [], "left_to_r_in_callback": True, "raised_after_finalizer": True,
                   "unraisable_hook_restored": True, "suspended_after": False, "callback_restored": True,
                   "left_alone": True, "held_inside": True, "handler_kept": True, "raised_at_hold_end": True,
                   "pending_after_hold": False}


def test_r_interrupts_held_outside_r_changes_nothing():
    import signal

    from tpuestimatorr_bridge import interrupts

    before = signal.getsignal(signal.SIGINT)
    assert interrupts.r_interrupt_flags() is None  # no libR in this process
    with interrupts.r_interrupts_held():
        assert signal.getsignal(signal.SIGINT) is before
    assert signal.getsignal(signal.SIGINT) is before
