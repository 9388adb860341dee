"""train_and_evaluate: eval every N steps, exporters (final/latest/best) and their state across restarts."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from helpers import array_input_fn, make_data


def _estimator(model_dir, lr=0.05):
    from tpuestimator import Estimator, RunConfig

    return Estimator("linear", RunConfig(model_dir=str(model_dir), train_batch_size=32, eval_batch_size=32,
                                         iterations_per_loop=10, save_checkpoints_steps=10, strategy="cpu"),
                     {"num_classes": 3, "learning_rate": lr})


def _on_eval(fn):
    """A hook calling fn(step, metrics) after each evaluation (what `on_eval=` did)."""
    from tpuestimator.core.hooks import Hook

    class OnEval(Hook):
        def after_eval(self, step, metrics):
            fn(step, metrics)
    return OnEval()


def test_evaluates_every_n_steps_and_exports(tmp_path):
    from tpuestimator.core.training import EvalSpec, TrainSpec, make_exporters, train_and_evaluate

    x, y = make_data(300)
    est = _estimator(tmp_path / "m")
    exporters = make_exporters(["final", "latest", "best"], str(tmp_path / "export"), keep=2, best_metric="accuracy")
    evals = []
    out = train_and_evaluate(est, TrainSpec(input_fn=array_input_fn(x, y), max_steps=50,
                                            hooks=[_on_eval(lambda step, m: evals.append(step))]),
                             EvalSpec(input_fn=array_input_fn(x, y), every_n_steps=20, exporters=exporters))
    assert evals == [20, 40, 50]
    assert out.global_step == 50 and out.metrics["global_step"] == 50
    assert sorted(os.listdir(tmp_path / "export" / "latest")) == ["40", "50"]   # keep=2
    assert os.listdir(tmp_path / "export" / "final") == ["50"]
    state = json.loads((tmp_path / "export" / "best" / "best_state.json").read_text())
    assert state["metric"] == "accuracy" and state["mode"] == "max"
    assert state["value"] == pytest.approx(max(h["accuracy"] for h in out.history))
    assert out.exports["best"] == state["export"]


def test_best_exporter_state_survives_a_restart(tmp_path):
    from tpuestimator.core.training import BestExporter

    x, y = make_data(300)
    est = _estimator(tmp_path / "m")
    est.train(array_input_fn(x, y), max_steps=20)
    first = BestExporter(str(tmp_path / "export"), metric="loss")
    metrics = est.evaluate(array_input_fn(x, y))
    assert first.after_eval(est, 20, metrics)
    # A "restarted" job: a new exporter object, a worse evaluation: no new export.
    again = BestExporter(str(tmp_path / "export"), metric="loss")
    assert again.after_eval(est, 30, {**metrics, "loss": metrics["loss"] + 1.0}) is None
    assert again.best()["step"] == 20
    assert again.after_eval(est, 40, {**metrics, "loss": metrics["loss"] - 0.01}).endswith("/40")


def test_early_stopping_stops_at_the_expected_evaluation(tmp_path):
    from tpuestimator.core.training import EarlyStopping, EvalSpec, TrainSpec, train_and_evaluate

    x, y = make_data(200)
    est = _estimator(tmp_path / "m", lr=0.0)     # a known plateau: the metric never improves
    evals = []
    out = train_and_evaluate(
        est, TrainSpec(input_fn=array_input_fn(x, y), max_steps=200,
                       hooks=[_on_eval(lambda step, m: evals.append(step))]),
        EvalSpec(input_fn=array_input_fn(x, y), every_n_steps=10,
                 early_stopping=EarlyStopping(metric="loss", mode="min", patience=2)))
    # 1st eval sets the best; 2nd and 3rd do not improve (patience 2); the 4th stops.
    assert evals == [10, 20, 30, 40]
    assert out.stopped_early and out.global_step == 40
    state = json.loads((tmp_path / "m" / "early_stopping.json").read_text())
    assert state["bad_evals"] == 3


def test_a_jobs_exports_carry_their_metadata_the_moment_they_appear(tmp_path, fixtures_dir):
    """Issue 19.9: the best and latest exports written at an evaluation mid-training got
    assets.extra/tpuestimator.json only when the job ended (and then with the job's last
    global step): `tpuestimator predict` could not read a best export while training went on,
    nor ever if the job was killed. Each export is read here as it appears (after_export)."""
    from tpuestimator.jobs.job import run_job
    from tpuestimator.serving.exports import EXPORT_META

    seen = {}

    def on_export(event, info):
        if event == "after_export":
            meta_path = os.path.join(info["export_dir"], "assets.extra", EXPORT_META)
            seen[info["export_dir"]] = json.loads(open(meta_path).read()) if os.path.exists(meta_path) else None

    result = run_job(str(fixtures_dir / "parity" / "parity.yaml"), model_dir=str(tmp_path / "m"), record=False,
                     overrides=["export.enabled=true", "export.exporters=[best, latest]", "eval.every_n_steps=20",
                                "train.save_checkpoints_steps=20"], hooks=[on_export])
    assert result.global_step == 40
    assert {os.path.basename(path) for path in seen} == {"20", "40"} and len(seen) >= 3, seen
    for path, meta in seen.items():
        assert meta is not None, f"{path} appeared without its metadata"
        assert meta["global_step"] == int(os.path.basename(path)) and meta["data"]["manifest"]
        assert meta["class_names"] and meta["feature_spec"]


def test_early_stopping_and_the_best_export_survive_a_restart(tmp_path):
    """README: "early stopping and a best-model export survive restarts". A training with
    early stopping is stopped mid-way (its call ends at step 20, as a killed or preempted job
    would), then the same training is started again by a new Estimator: the patience counter
    and the best value come back from the model dir, so it stops at the evaluation the
    uninterrupted run would have stopped at, and the best export stays the best checkpoint's.
    The monitored metric is the training loss in mode `max`: training lowers it at every
    evaluation, so the first evaluation (step 10) is the best and every later one is worse."""
    import numpy as np

    from tpuestimator.core.training import EarlyStopping, EvalSpec, TrainSpec, make_exporters, train_and_evaluate
    from tpuestimator.serving.exports import open_export

    x, y = make_data(200)

    def run(max_steps):
        evals = []
        spec = EvalSpec(input_fn=array_input_fn(x, y), every_n_steps=10,
                        exporters=make_exporters(["best"], str(tmp_path / "export"), best_metric="loss",
                                                 best_mode="max"),
                        early_stopping=EarlyStopping(metric="loss", mode="max", patience=2))
        out = train_and_evaluate(_estimator(tmp_path / "m", lr=0.2),
                                 TrainSpec(input_fn=array_input_fn(x, y), max_steps=max_steps,
                                           hooks=[_on_eval(lambda step, m: evals.append((step, m["loss"])))]),
                                 spec)
        return out, evals

    first, evals = run(20)
    assert [s for s, _ in evals] == [10, 20] and evals[1][1] < evals[0][1] and not first.stopped_early
    state = json.loads((tmp_path / "m" / "early_stopping.json").read_text())
    assert state["bad_evals"] == 1 and state["best"] == pytest.approx(evals[0][1])

    again, more = run(200)   # the restart: new objects, only the model dir remembers
    # evaluations 3 and 4 are the 2nd and 3rd without improvement: patience 2 stops at step 40
    # (a restart that forgot would take step 30 as its best and stop at 60)
    assert [s for s, _ in more] == [30, 40]
    assert again.stopped_early and again.global_step == 40
    state = json.loads((tmp_path / "m" / "early_stopping.json").read_text())
    assert state["bad_evals"] == 3 and state["best"] == pytest.approx(evals[0][1])
    best = json.loads((tmp_path / "export" / "best" / "best_state.json").read_text())
    assert best["step"] == 10 and best["value"] == pytest.approx(evals[0][1])
    assert sorted(os.listdir(tmp_path / "export" / "best")) == ["10", "best_state.json"]
    assert again.exports["best"] == best["export"]
    # The best export is the step-10 model: its probabilities give, by hand, the step-10 loss.
    probabilities = np.asarray(open_export(best["export"]).run("features", {"x": x})["probabilities"])
    by_hand = -np.mean(np.log(probabilities[np.arange(len(y)), y]))
    assert by_hand == pytest.approx(evals[0][1], rel=1e-4)
    assert by_hand > more[-1][1] + 1e-3


def test_one_controller_brackets_train_and_evaluate_hooks_begin_and_end_once(tmp_path):
    """One TrainController per train_and_evaluate call: the train hooks see `begin` once (with
    the job's max_steps), `end` once after the last evaluation and export, and each evaluation
    as `before_eval` then `after_eval`, training pausing with its checkpoint on disk."""
    from tpuestimator.core.hooks import Hook
    from tpuestimator.core.training import EvalSpec, TrainSpec, make_exporters, train_and_evaluate

    model_dir = tmp_path / "m"
    events = []

    class Recorder(Hook):
        def begin(self, step, info):
            events.append(("begin", step, info["max_steps"]))

        def before_loop(self, step):
            events.append(("before_loop", step))

        def after_loop(self, step, logs):
            events.append(("after_loop", step))

        def before_eval(self, step):
            checkpoints = sorted(int(p.name[5:-6]) for p in model_dir.glob("ckpt-*.index"))
            events.append(("before_eval", step, checkpoints[-1]))

        def after_eval(self, step, metrics):
            events.append(("after_eval", step))

        def after_export(self, step, export_dir):
            events.append(("after_export", step))

        def end(self, step, logs):
            events.append(("end", step))

    callable_events = []
    x, y = make_data(300)
    est = _estimator(model_dir)
    exporters = make_exporters(["latest"], str(tmp_path / "export"), keep=5)
    out = train_and_evaluate(est, TrainSpec(input_fn=array_input_fn(x, y), max_steps=50,
                                            hooks=[Recorder(), lambda event, info: callable_events.append(event)]),
                             EvalSpec(input_fn=array_input_fn(x, y), every_n_steps=20, exporters=exporters))
    assert out.global_step == 50

    def loops(*starts):
        return [e for s in starts for e in (("before_loop", s), ("after_loop", s + 10))]

    def evaluation(step):
        return [("before_eval", step, step), ("after_eval", step), ("after_export", step)]

    assert events == [("begin", 0, 50), *loops(0, 10), *evaluation(20), *loops(20, 30), *evaluation(40),
                      *loops(40), *evaluation(50), ("end", 50)]
    assert callable_events.count("begin") == callable_events.count("end") == 1
    assert callable_events[0] == "begin" and callable_events[-1] == "end" and "before_eval" not in callable_events


def _loss_by_hand(export_dir, x, y):
    """The export's mean log loss on (x, y), computed here from its probabilities."""
    import numpy as np

    from tpuestimator.serving.exports import open_export

    probabilities = np.asarray(open_export(export_dir).run("features", {"x": x})["probabilities"])
    return -np.mean(np.log(probabilities[np.arange(len(y)), y]))


def test_an_export_of_a_step_already_exported_in_the_same_training_is_a_copy_of_it(tmp_path):
    """Two exporters at one step (`final` and `latest` at the last step; `final` and `best`
    when the best evaluation's weights are restored at the end) hold the same model and
    weights: the second is a copy of the first, not a second trace and save. A step's copy is
    never taken from another step's export: each export's own probabilities give, by hand,
    the loss its step's evaluation recorded."""
    from tpuestimator.core.training import EarlyStopping, EvalSpec, TrainSpec, make_exporters, train_and_evaluate

    x, y = make_data(200)

    def files(folder):
        return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}

    # final, latest and best: best (loss in mode `max`: training lowers the loss, so the first
    # evaluation is the best) at step 20, latest at 20, 40 and 50, final at 50
    out = train_and_evaluate(
        _estimator(tmp_path / "m", lr=0.2), TrainSpec(input_fn=array_input_fn(x, y), max_steps=50),
        EvalSpec(input_fn=array_input_fn(x, y), every_n_steps=20,
                 exporters=make_exporters(["final", "latest", "best"], str(tmp_path / "export"), best_metric="loss",
                                          best_mode="max")))
    loss = {h["step"]: h["loss"] for h in out.history}
    assert sorted(loss) == [20, 40, 50] and loss[50] < loss[40] < loss[20]
    export = tmp_path / "export"
    assert sorted(os.listdir(export / "latest")) == ["20", "40", "50"] and os.listdir(export / "final") == ["50"]
    assert json.loads((export / "best" / "best_state.json").read_text())["step"] == 20
    # the same step's exports: byte for byte the same SavedModel (two saves name their traced
    # functions apart); other steps' are not
    assert files(export / "final" / "50") == files(export / "latest" / "50")
    assert files(export / "best" / "20") == files(export / "latest" / "20")
    assert (export / "final" / "50" / "saved_model.pb").read_bytes() != (export / "latest" / "40" / "saved_model.pb").read_bytes()
    for name, step in (("final", 50), ("latest", 40), ("best", 20)):
        assert _loss_by_hand(export / name / str(step), x, y) == pytest.approx(loss[step], rel=1e-4), (name, step)

    # early stopping with restore_best: stops at step 40 (the 3rd evaluation without improvement,
    # patience 2), restores step 10's weights, and the
    # final export (version 10) is a copy of the best export of step 10
    out = train_and_evaluate(
        _estimator(tmp_path / "m2", lr=0.2), TrainSpec(input_fn=array_input_fn(x, y), max_steps=200),
        EvalSpec(input_fn=array_input_fn(x, y), every_n_steps=10,
                 exporters=make_exporters(["final", "latest", "best"], str(tmp_path / "export2"), keep=1,
                                          best_metric="loss", best_mode="max"),
                 early_stopping=EarlyStopping(metric="loss", mode="max", patience=2, restore_best=True)))
    assert out.stopped_early and out.global_step == 40 and out.restored_step == 10
    # the best weights kept are the training's own checkpoint of step 10, linked, not written again
    assert os.path.samefile(tmp_path / "m2" / "best_weights" / "ckpt-10.index", tmp_path / "m2" / "ckpt-10.index")
    export = tmp_path / "export2"
    # `latest` wrote step 10 first and has removed it since (keep=1): the copy is of `best`'s
    assert os.listdir(export / "latest") == ["40"]
    assert os.listdir(export / "final") == ["10"] and files(export / "final" / "10") == files(export / "best" / "10")
    assert _loss_by_hand(export / "final" / "10", x, y) == pytest.approx(out.history[0]["loss"], rel=1e-4)
    assert out.history[0]["step"] == 10 and out.history[-1]["loss"] < out.history[0]["loss"] - 1e-3

    # an export found already there (here another training's, in a shared export folder) is kept
    # and never copied: the final export of the same step is this training's own
    shutil.copytree(tmp_path / "export" / "latest" / "40", tmp_path / "export3" / "best" / "20")
    out = train_and_evaluate(
        _estimator(tmp_path / "m3", lr=0.2), TrainSpec(input_fn=array_input_fn(x, y), max_steps=20),
        EvalSpec(input_fn=array_input_fn(x, y), every_n_steps=20,
                 exporters=make_exporters(["final", "best"], str(tmp_path / "export3"))))
    export = tmp_path / "export3"
    assert files(export / "best" / "20") == files(tmp_path / "export" / "latest" / "40")
    assert files(export / "final" / "20") != files(export / "best" / "20")
    assert _loss_by_hand(export / "final" / "20", x, y) == pytest.approx(out.history[0]["loss"], rel=1e-4)


def test_best_weights_without_a_checkpoint_of_their_step_are_written_and_restored(tmp_path):
    """`keep_best_weights` links the training's checkpoint of the step when it is the latest;
    otherwise (here: step 7, never saved) it writes the weights, and `restore_best_weights`
    brings them back after the model has moved on."""
    import numpy as np

    from tpuestimator.core.best_weights import keep_best_weights, restore_best_weights

    x, y = make_data(100)
    est = _estimator(tmp_path / "m")
    est.train(array_input_fn(x, y), max_steps=10)
    kept = [v.numpy() for v in est.state.model.trainable_variables]
    prefix = keep_best_weights(est, 7)
    assert prefix.endswith(os.path.join("best_weights", "ckpt-7"))
    assert os.stat(prefix + ".index").st_nlink == 1      # written: no checkpoint of step 7 to link
    for variable in est.state.model.trainable_variables:
        variable.assign(variable + 1.0)
    assert restore_best_weights(est, 7)
    for variable, value in zip(est.state.model.trainable_variables, kept):
        np.testing.assert_array_equal(variable.numpy(), value)


def test_a_copied_export_holds_its_own_metadata_and_none_of_the_sources_extra_files(tmp_path):
    """`copy_saved_model`: the source's `assets.extra/` (its metadata; a warmup file a job
    writes after the export) is not carried over; the copy gets the metadata it is given,
    and appears whole or not at all."""
    from tpuestimator.core.signatures import copy_saved_model

    source = tmp_path / "best" / "7"
    (source / "variables").mkdir(parents=True)
    (source / "assets.extra").mkdir()
    (source / "saved_model.pb").write_bytes(b"graph")
    (source / "variables" / "variables.index").write_bytes(b"index")
    (source / "assets.extra" / "tpuestimator.json").write_text('{"global_step": 7, "from": "source"}')
    (source / "assets.extra" / "tf_serving_warmup_requests").write_bytes(b"requests")
    path = copy_saved_model(str(source), str(tmp_path / "final"), version=7, model_dir=str(tmp_path),
                            step=7, assets_extra={"tpuestimator.json": {"global_step": 7}})
    assert path == str(tmp_path / "final" / "7")
    copy = tmp_path / "final" / "7"
    assert sorted(str(p.relative_to(copy)) for p in copy.rglob("*") if p.is_file()) == [
        "assets.extra/tpuestimator.json", "saved_model.pb", "variables/variables.index"]
    assert json.loads((copy / "assets.extra" / "tpuestimator.json").read_text()) == {"global_step": 7}
    assert (copy / "saved_model.pb").read_bytes() == b"graph"
    assert os.listdir(tmp_path / "final") == ["7"]     # no temp folder left beside it
    with pytest.raises(FileExistsError):                # an export is never overwritten
        copy_saved_model(str(source), str(tmp_path / "final"), version=7, model_dir=str(tmp_path), step=7)
