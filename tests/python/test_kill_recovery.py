"""Issue 13.4: after a kill -9 anywhere, the rerun completes what the kill skipped.

The CLI trains in a subprocess that dies at a chosen point exactly as under SIGKILL
(``TPUESTIMATOR_FAULT=<phase>@<step>``: SIGKILL, tpuestimator/faults.py); the same
command without it then resumes. Parity job: 40 steps, loops of 10, checkpoint and evaluation
every 20, exporters final + best.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tpuestimator.system.faults import RETURN_CODE

pytestmark = pytest.mark.real_process  # TPUESTIMATOR_STRESS=N repeats these (conftest.py)

SETTINGS = ["train.max_steps=40", "train.save_checkpoints_steps=20", "eval.every_n_steps=20", "export.enabled=true",
            "export.exporters=[final, best]"]
# The CLI, with the run record's progress written at every loop boundary (no time throttle),
# so the test knows exactly which step a killed run shows.
CLI = ("import sys; import tpuestimator.runs.record as record; record.HEARTBEAT_S = 0.0; "
       "from tpuestimator.cli import main; sys.exit(main(sys.argv[1:]))")


def _train_args(tmp_path, fixtures_dir) -> list[str]:
    args = ["train", str(fixtures_dir / "parity" / "parity.yaml"), "--model-dir", str(tmp_path / "model"),
            "--runs-dir", str(tmp_path / "runs")]
    for setting in SETTINGS:
        args += ["--set", setting]
    return args


def _train(tmp_path, fixtures_dir, python_env, python, fault):
    """A killed run: a real process (forked_python: a fork that skips the TensorFlow import, ~6
    CPU s, and dies by SIGKILL as `python` would; conftest.py)."""
    env = dict(python_env, TPUESTIMATOR_FAULT=fault)  # as on the core install (2 CPU s less)
    return subprocess.run([python, "-c", CLI, *_train_args(tmp_path, fixtures_dir)], env=env,
                          capture_output=True, text=True, timeout=600)


def _runs(tmp_path):
    from tpuestimator.runs import ls_runs, run_info

    return [run_info(r["run_dir"]) for r in reversed(ls_runs(str(tmp_path / "runs")))]  # oldest first


def _leftovers(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.name.endswith(".tmp") or p.name.endswith("_temp")]


@pytest.mark.slow
def test_a_rerun_completes_what_kills_skipped(tmp_path, fixtures_dir, python_env, forked_python, monkeypatch, caplog):
    """Three runs of one command: killed between the checkpoint of step 20 and its evaluation
    (that evaluation and its best export used to be skipped for good), then killed inside the
    best export of step 20 (its temp folder used to survive a later successful rerun), then
    completed: step 20 evaluated and exported, no temp left, the user's files kept. The killed
    runs are processes of their own (a kill -9 ends the process); the completing rerun is
    `cli.main` in this process (what the console script calls: the rerun is not about the
    process, and a TensorFlow start of its own cost seconds)."""
    import logging

    import tpuestimator.runs.record as record
    from tpuestimator.cli import main

    model = tmp_path / "model"
    killed = _train(tmp_path, fixtures_dir, python_env, forked_python, fault="after_checkpoint@20")
    assert killed.returncode == RETURN_CODE, killed.stderr[-2000:]
    assert (model / "ckpt-20.index").is_file() and not (model / "last_evaluation.json").exists()
    assert not (model / "export" / "best").exists()

    killed = _train(tmp_path, fixtures_dir, python_env, forked_python, fault="in_export@20")
    assert killed.returncode == RETURN_CODE, killed.stderr[-2000:]
    assert "has no evaluation" in killed.stderr  # (b) evaluated before training on
    left = _leftovers(model)
    assert left and all(Path(p).name.startswith(".20.") for p in left), left
    (model / "notes.tmp").write_text("mine")
    (model / "export" / "best" / "README.txt").write_text("mine")
    (model / "ckpt-40_temp").mkdir()  # what a checkpoint write killed mid-way leaves (TensorFlow's name)

    monkeypatch.delenv("TPUESTIMATOR_FAULT", raising=False)  # in this process: never a fault point
    monkeypatch.setattr(record, "HEARTBEAT_S", 0.0)  # as CLI above
    with caplog.at_level(logging.INFO, logger="tpuestimator"):
        assert main(_train_args(tmp_path, fixtures_dir)) == 0, caplog.text[-2000:]
    assert "removed" in caplog.text and "killed while writing it" in caplog.text
    assert _leftovers(model) == [str(model / "notes.tmp")]  # (a) only ours removed
    assert (model / "notes.tmp").read_text() == "mine" and (model / "export" / "best" / "README.txt").exists()
    first, second, third = _runs(tmp_path)
    assert third["properties"]["resumed_from_step"] == 20
    m = third["metrics"]  # a row per loop (30, 40), the evaluations' values at 20 and 40
    assert m["epoch"] == [20, 30, 40]
    # the evaluation the kills skipped, then the last
    assert [x for x, v in zip(m["epoch"], m["val_loss"]) if v is not None] == [20, 40]
    assert json.loads((model / "last_evaluation.json").read_text())["step"] == 40
    best = json.loads((model / "export" / "best" / "best_state.json").read_text())
    assert (model / "export" / "best" / "20").is_dir() and Path(best["export"]).is_dir()
    assert sorted(os.listdir(model / "export" / "final")) == ["40"]
    # (c) the killed runs' records show how far they got
    assert first["properties"]["global_step"] == 20
    assert float(first["properties"]["end"]) > float(first["properties"]["start"])


def test_progress_is_written_at_loop_boundaries(tmp_path):
    """(c) Killed runs showed "0/1500, 0s": the progress (global_step, end) was written every 5 s
    at best. Now at every loop boundary, at most every HEARTBEAT_S (1 s)."""
    import time

    from tpuestimator.runs import RunRecorder
    from tpuestimator.runs.hook import RecorderHook
    from tpuestimator.runs.record import HEARTBEAT_S

    recorder = RunRecorder.create(str(tmp_path / "runs"), config={}, flags={}, script=None, planned_rows=None)
    hook = RecorderHook(recorder)
    props = recorder.run_dir / "tfruns.d" / "properties"
    hook.after_loop(100, {"loss": 1.0, "steps": 100})
    assert (props / "global_step").read_text() == "100\n"
    assert HEARTBEAT_S <= 1.0
    time.sleep(1.1)
    hook.after_loop(200, {"loss": 0.5, "steps": 100})
    assert (props / "global_step").read_text() == "200\n"
    assert float((props / "end").read_text()) >= recorder.start + HEARTBEAT_S
