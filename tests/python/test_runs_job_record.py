"""runs/job_record.py: what a job's run record says about the job (TensorFlow-free)."""
from __future__ import annotations

from pathlib import Path

from tpuestimator.config import load_config
from tpuestimator.runs import RunRecorder, run_info
from tpuestimator.runs.job_record import add_nonfinite_report, job_flags, model_summary, planned_rows
from tpuestimator.runs.metric_rows import MAX_TRAIN_ROWS


def _cfg(fixtures_dir, *overrides):
    return load_config(str(fixtures_dir / "parity" / "parity.yaml"), list(overrides))


def test_flags_hold_params_sizes_precision_and_other_overrides(fixtures_dir):
    flags = job_flags(_cfg(fixtures_dir, "params.learning_rate=0.5",
                           "run.seed=3"))
    assert flags["model"] == "linear" and flags["learning_rate"] == 0.5 and flags["num_classes"] == 3
    assert flags["train.batch_size"] == 16 and flags["train.max_steps"] == 40
    assert flags["train.iterations_per_loop"] == 10 and "run.precision" in flags
    assert flags["run.seed"] == 3 and "params.learning_rate" not in flags


def test_planned_rows_count_one_row_per_loop_bounded_for_long_runs(fixtures_dir):
    # 40 steps in loops of 10; an evaluation ends a loop (at 20, or at 30 then 40: 3 + 1 loops)
    assert planned_rows(_cfg(fixtures_dir, "eval.every_n_steps=20")) == 4
    assert planned_rows(_cfg(fixtures_dir, "eval.every_n_steps=30")) == 4
    no_eval = _cfg(fixtures_dir, "train.max_steps=35", "train.iterations_per_loop=5",
                   "train.save_checkpoints_steps=5")
    del no_eval.raw["data"]["manifest"]  # training data only (what planned_rows reads)
    assert planned_rows(no_eval) == 7  # one metric row per training loop
    assert planned_rows(_cfg(fixtures_dir, "train.max_steps=null")) is None
    # 10,000 loops: at most MAX_TRAIN_ROWS training rows, plus the two evaluations' rows
    long = planned_rows(_cfg(fixtures_dir, "train.max_steps=100000", "eval.every_n_steps=50000",
                             "train.save_checkpoints_steps=50000"))
    assert MAX_TRAIN_ROWS // 2 < long <= MAX_TRAIN_ROWS + 2


def test_model_summary_falls_back_to_repr():
    class NoSummary:
        def summary(self, **kw):
            raise TypeError("no print_fn")

        def __repr__(self):
            return "NoSummary()"

    class WithSummary:
        def summary(self, print_fn, line_length):
            print_fn("Model: x")
            print_fn("Total params: 3")

    assert model_summary(NoSummary()) == "NoSummary()"
    assert model_summary(WithSummary()) == "Model: x\nTotal params: 3"


def test_a_failed_runs_record_gets_the_nonfinite_report(tmp_path):
    report = tmp_path / "nonfinite-report"
    report.mkdir()
    (report / "report.txt").write_text("loss is NaN at step 7\n")
    (report / "report.json").write_text('{"step": 7}')
    (report / "bundle").mkdir()  # the repro bundle stays where it is
    error = RuntimeError("NaN loss")
    error.report_path = str(report)
    rec = RunRecorder.create(tmp_path / "runs", config={}, flags={}, script="a.yaml", planned_rows=None)
    add_nonfinite_report(rec, error)
    add_nonfinite_report(rec, RuntimeError("no report"))  # nothing to copy: no error either
    rec.fail(error)
    assert (Path(rec.run_dir) / "nonfinite" / "report.txt").read_text() == "loss is NaN at step 7\n"
    assert (Path(rec.run_dir) / "nonfinite" / "report.json").is_file()
    assert not (Path(rec.run_dir) / "nonfinite" / "bundle").exists()
    assert run_info(rec.run_dir)["properties"]["nonfinite_report"] == str(report.resolve())
