"""The benchmark scripts still run: each in `--smoke` mode (tiny sizes), producing a
well-formed result file. Nothing here asserts on speed.

Every script benchmarks/README.md names is run here: the `common.py` ones (`SCRIPTS`), and
bench_input.py (its Markdown report), bench_predict_memory.py (peak memory, one process per
measure), service_capacity.py (JSON on stdout) and bench_tables_speed.py, each with its own
checks; `test_every_script_the_readme_names_is_smoke_run` keeps the list complete.

The Python scripts run one after another in ONE subprocess (`bench_smoke_runner.py`, each as
`python SCRIPT ARGS` runs it): a fresh process per script cost ~9 CPU seconds of TensorFlow
start-up each, measuring nothing, and was most of this file's cost. For the same reason each
script's `--smoke` starts as few processes as what it measures needs: bench_startup.py times
two whole processes (bare and cli, the target's pair), bench_predict_memory.py one process for
all its measures, bench_teardown.py one child for both settings (its work-around patches
TensorFlow process-wide), bench_fashion_mnist.py none (its peers run in threads). gpu/run_gpu.sh
(a shell script starting its own Pythons) and run_all.py (no TensorFlow) run on their own.

Every Python these start, the runner included, is a fork of one server that imported TensorFlow
(fork_python.py, one per module: `python_launcher`): a child's TensorFlow import, ~7 CPU seconds
each and 8 of them (bench_startup.py's pair, bench_predict_memory.py's and bench_teardown.py's
children, run_gpu.sh's three steps, the runner), measured nothing here. The children still run
their own command lines end to end, each in a process of its own."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

import fork_python

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks"
RUNNER = Path(__file__).resolve().parent / "bench_smoke_runner.py"

pytestmark = pytest.mark.slow

# script -> (result name, workload keys expected in results)
SCRIPTS = {
    "bench_loop.py": ("loop", ["linear", "cnn"]),
    "bench_eval.py": ("eval", ["linear", "cnn"]),
    "bench_checkpoint.py": ("checkpoint", ["linear", "cnn"]),
    "bench_startup.py": ("startup", ["seconds_to_first_loop"]),
    "bench_teardown.py": ("teardown", ["tensorflow", "workaround"]),
    "bench_hooks.py": ("hooks", ["configs", "direct"]),
    "bench_resume.py": ("resume", ["resume"]),
    "bench_tables_input.py": ("tables_input", ["configs", "workload"]),
    "bench_tables_quality.py": ("tables_quality", ["tables"]),
    "bench_tables_defaults.py": ("tables_defaults", ["tables", "chosen"]),
    "bench_fashion_mnist.py": ("fashion_mnist", ["peers", "goals", "flops", "cpu_peak", "baselines"]),
}
# Scripts that cannot run in the project's venv, and why.
NOT_RUN_HERE = {"tables_tf215_dnn.py": "the TF 2.15 baseline: needs a TensorFlow 2.15 interpreter",
                "fashion_mnist_tf1.py": "the TF1 peer of bench_fashion_mnist.py: needs a TensorFlow 2.15 interpreter"}
# The scripts with their own output and their own checks below.
OTHER_SCRIPTS = ("bench_input.py", "bench_predict_memory.py", "service_capacity.py", "bench_tables_speed.py", "run_all.py",
                 "gpu/run_gpu.sh", "bench_tables_early_stopping.py")


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO / "python"), TF_CPP_MIN_LOG_LEVEL="2")


@pytest.fixture(scope="module")
def python_launcher(tmp_path_factory):
    """A `python` whose runs are forks of a server that imported TensorFlow (fork_python.py)."""
    server, launcher = fork_python.start(tmp_path_factory.mktemp("fork-python"), _env())
    yield str(launcher)
    fork_python.stop(server)


def _run(args: list[str], tmp_path: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, *args], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{args} failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    return proc


def _check_stats(stats: dict, where: str) -> None:
    for key in ("n", "median", "min", "max", "spread"):
        assert key in stats, f"{where}: no {key}"
    assert stats["n"] >= 1, where
    assert stats["median"] is not None and math.isfinite(stats["median"]) and stats["median"] > 0, where
    assert stats["min"] <= stats["median"] <= stats["max"], where


def _check_result(path: Path, name: str, keys: list[str]) -> dict:
    data = json.loads(path.read_text())
    assert data["benchmark"] == name
    assert data["smoke"] is True
    assert data["machine"]["tensorflow"] and data["machine"]["logical_cpus"] >= 1
    for key in keys:
        assert key in data["results"], f"{name}: no results for {key}"
    assert data["ratios"], f"{name}: no ratios"
    for key, stats in data["ratios"].items():
        _check_stats(stats, f"{name}:{key}")
        if "target" in stats:
            assert isinstance(stats["met"], bool)
    return data


# ---------------------------------------------------------------------------- the smoke runs
def _plan(out: Path) -> dict[str, list[str]]:
    """script -> its arguments. One interleaved repeat: the scripts' statistics take n = 1, and
    a repeat of a smoke run measures nothing."""
    plan = {script: ["--smoke", "--repeats", "1", "--out", str(out)] for script in SCRIPTS}
    plan.update({
        "bench_predict_memory.py": ["--smoke", "--records", "400", "--no-in-memory", "--out", str(out)],
        # the TF 2.15 side needs a TensorFlow 2.15 interpreter outside the project's venv: not run here
        "bench_tables_speed.py": ["--smoke", "--repeats", "1", "--configs", "tpuestimator,keras", "--out", str(out)],
        "bench_input.py": ["--smoke", "--out", str(out / "input_results.md")],
        "bench_tables_early_stopping.py": ["--tables", "infert", "--models", "linear", "--max-steps", "60",
                                           "--modes", "before,after,after-reread,after-write-best",
                                           "--out", str(out / "early_stopping")],
        "service_capacity.py": ["--size", "16", "--records", "64", "--batch-size", "16", "--seconds", "0.2",
                                "--rounds", "1"],
    })
    return plan


def _check_script(script: str, out: Path, stdout: str, tmp_path: Path) -> None:
    if script in SCRIPTS:
        name, keys = SCRIPTS[script]
        _check_named_result(name, _check_result(out / f"{name}.json", name, keys), out, tmp_path)
    elif script == "bench_input.py":
        _check_input_report(out / "input_results.md")
    elif script == "bench_predict_memory.py":
        _check_predict_memory(out)
    elif script == "service_capacity.py":
        _check_service_capacity(stdout)
    elif script == "bench_tables_speed.py":
        _check_tables_speed(out)
    elif script == "bench_tables_early_stopping.py":
        _check_tables_early_stopping(out / "early_stopping")
    else:
        raise AssertionError(f"{script}: no checks")


def _check_tables_early_stopping(out: Path) -> None:
    rows = {r["mode"]: r for r in json.loads((out / "tables_early_stopping.json").read_text())}
    assert set(rows) == {"before", "after", "after-reread", "after-write-best"}, rows
    # the eval set read from its files at every evaluation, or the best weights written instead of
    # linked: the same training, only its CPU differs
    for mode in ("after-reread", "after-write-best"):
        assert ({k: v for k, v in rows[mode].items() if k not in ("mode", "cpu_s")}
                == {k: v for k, v in rows["after"].items() if k not in ("mode", "cpu_s")}), rows
    assert rows["before"]["steps"] == rows["before"]["exported_step"] == 60 and not rows["before"]["stopped_early"]
    assert rows["after"]["exported_step"] <= rows["after"]["steps"] <= 60, rows["after"]   # the best step's model
    for row in rows.values():
        assert 0 <= row["accuracy"] <= 1 and row["cpu_s"] > 0, row


def test_benchmark_scripts_smoke(tmp_path, python_launcher):
    """Every Python benchmark script runs to the end in `--smoke` mode and writes what it should;
    a failure names each script that broke, with its traceback."""
    out = tmp_path / "results"
    plan = _plan(out)
    logs = tmp_path / "stdout"
    logs.mkdir()
    plan_path, status_path = tmp_path / "plan.json", tmp_path / "status.json"
    plan_path.write_text(json.dumps([{"script": str(BENCH / s), "args": a, "stdout": str(logs / f"{s}.txt")}
                                     for s, a in plan.items()]))
    # one process for all, and forks for the children (module docstring): ~104 CPU seconds with a
    # fresh Python per child (was ~200 before the leaner smoke runs), far more wall time under load
    proc = subprocess.run([python_launcher, str(RUNNER), str(plan_path), str(status_path), python_launcher],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=1800)
    status = json.loads(status_path.read_text()) if status_path.exists() else {}
    # what each script cost (shown with the failures, or with `pytest -rP`): the runner's status
    # file has each script's seconds and CPU seconds (the runner's, not its forked children's)
    print("\n".join(f"{script:28s} {ran['seconds']:7.1f} s {ran['cpu_seconds']:7.1f} CPU s"
                     for script, ran in status.items() if "seconds" in ran))
    print("forked runs (the runner first, then the scripts' children):\n"
          + (Path(python_launcher).parent / "fork-python.log").read_text())
    failures, not_run = [], []
    for script in plan:
        ran = status.get(script)
        if ran is None:
            not_run.append(script)
        elif ran.get("running"):
            failures.append(f"{script}: the runner process ended while it ran (exit {proc.returncode}):\n"
                            f"{proc.stderr[-3000:]}")
        elif not ran["ok"]:
            failures.append(f"{script} failed:\n{ran['error'][-3000:]}")
        else:
            try:
                _check_script(script, out, (logs / f"{script}.txt").read_text(), tmp_path)
            except AssertionError:
                failures.append(f"{script}: its output is wrong:\n{traceback.format_exc()[-3000:]}")
    if not_run:
        failures.append(f"not run (the runner ended first, exit {proc.returncode}): {', '.join(not_run)}"
                        + ("" if status else f"\n{proc.stderr[-3000:]}"))
    assert proc.returncode == 0 or failures, f"the runner failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    assert not failures, "\n\n".join(failures)


# ---------------------------------------------------------------------------- per-script checks
def _check_named_result(name: str, data: dict, out: Path, tmp_path: Path) -> None:
    if name == "loop":
        linear = data["results"]["linear"]
        assert {"bare", "keras", "estimator"} <= set(linear["configs"])
        for cfg in linear["configs"].values():
            _check_stats(cfg["steps_per_sec"], "loop config")
        assert "linear:estimator/bare" in data["ratios"] and data["ratios"]["linear:estimator/bare"]["target"] == 0.90
    if name == "eval":
        checks = data["results"]["linear"]["checks"]
        assert checks["predict_count_estimator"] == checks["predict_count_bare"] == 300
        assert checks["predict_same_classes"] is True
        assert checks["eval_accuracy_estimator"] == pytest.approx(checks["eval_accuracy_bare"], abs=1e-6)
        # process CPU per pass beside the wall time; the cnn's targets (issue 31, item 5)
        for workload in ("linear", "cnn"):
            res = data["results"][workload]
            assert set(res["cpu_efficiency"]) == set(res["ratios"])
            assert all(c["cpu_us_per_example"]["median"] > 0 for c in res["configs"].values())
        assert data["ratios"]["cnn:eval/estimator/bare"]["target"] == 0.97
        assert data["ratios"]["cnn:predict/estimator/bare"]["target"] == 0.95
    if name == "hooks":
        assert set(data["results"]["configs"]) == {"bare", "sentinel", "control", "default_hooks", "host_call"}
        assert {"sentinel/bare", "default_hooks/sentinel"} <= set(data["ratios"])
        assert data["results"]["direct"]["bare_loop_ms"] > 0
    if name == "checkpoint":
        for workload in ("linear", "cnn"):  # async_checkpoint: true saves, keeps max_to_keep, restores the save-time weights
            assert data["results"][workload]["async_checkpoint"]["works"] is True
    if name == "tables_input":
        assert set(data["results"]["configs"]) == {"bare", "tpuestimator"}
        assert data["ratios"]["tpuestimator/bare"]["target"] == 0.9
    if name == "tables_quality":
        # both sides trained on the same rows: each table's repeats name the writer's split sizes
        tables = data["results"]["tables"]
        assert set(tables) == {"mtcars", "iris"}
        mtcars, iris = tables["mtcars"]["repeats"][0], tables["iris"]["repeats"][0]
        assert mtcars["train_rows"] + mtcars["eval_rows"] == 32 and mtcars["ols_rmse"] > 0
        assert iris["train_rows"] + iris["eval_rows"] == 150 and 0 <= iris["logistic_accuracy"] <= 1
    if name == "tables_defaults":
        # smoke: the bundled mtcars (regression) and infert (classification), `linear` at one
        # configuration, early stopping on the held-out loss; each scored against OLS / logistic regression
        tables = data["results"]["tables"]
        assert set(tables) == {"mtcars", "infert"}
        assert tables["mtcars"]["train_rows"] + tables["mtcars"]["eval_rows"] == 32
        assert tables["infert"]["train_rows"] + tables["infert"]["eval_rows"] == 248
        for table in tables.values():
            run = table["runs"]["linear"]["adam 0.01"]
            assert run["score"] > 0 and isinstance(run["beats_trivial"], bool) and 0 < run["steps"] <= 10
        assert data["results"]["chosen"]["linear"]["chosen"] == "adam 0.01"
    if name == "fashion_mnist":
        # smoke: tpuestimator (float32 and mixed_bfloat16) and Keras on the example's first 600 training / 100
        # test images, 2 segments of 10 steps (two loops of 5); the TF1 peer (TF 2.15 venv, created by a full run) is left out
        peers = data["results"]["peers"]
        assert set(peers) == {"tpuestimator", "tpuestimator_bf16", "keras"}
        # the bf16 peer trains in bfloat16 (its layers' compute dtype), the other in float32, and the
        # report compares them: CPU per step and test accuracy (issue 31, item 3)
        assert peers["tpuestimator_bf16"]["compute_dtype"] == "bfloat16"
        assert peers["tpuestimator"]["compute_dtype"] == "float32"
        bf16_goals = [g for g in data["results"]["goals"] if g["goal"].startswith("mixed_bfloat16")]
        assert len(bf16_goals) == 2 and "1.5x the float32 step" in bf16_goals[0]["goal"]
        assert peers["tpuestimator_bf16"]["speedup_cpu_per_step"] > 0
        assert data["results"]["workload"]["test_images"] == 100
        for peer in peers.values():
            assert [s["step"] for s in peer["segments"]] == [10, 20]
            assert 0.0 <= peer["accuracy"] <= 1.0 and peer["accuracy"] == peer["segments"][-1]["accuracy"]
        assert data["ratios"]["tpuestimator/keras"]["target"] == 1.1
        assert any("tf1 not run" in note for note in data["notes"])
        # the cnn's forward pass: conv 5x5x1x32 and 5x5x32x64 at 28x28 and 14x14, dense 3136x128 and 128x10
        forward = 2 * (28 * 28 * 32 * 25 + 14 * 14 * 64 * 25 * 32 + 3136 * 128 + 128 * 10)
        assert data["results"]["flops"] == {"forward_flops_per_image": forward,
                                            "train_flops_per_step": 3 * forward * 16}
    if name == "startup":
        assert data["ratios"]["cli/bare"]["target"] == 1.5
        # run_all.py --report-only rebuilds the README's figures table from result files, running nothing.
        readme = tmp_path / "README.md"
        readme.write_text("# x\n\n<!-- figures:begin -->\nold\n<!-- figures:end -->\n\nkept\n")
        _run([str(BENCH / "run_all.py"), "--report-only", "--results", str(out), "--readme", str(readme)], tmp_path)
        text = readme.read_text()
        assert "old" not in text and "kept" in text and "cli/bare" in text


def test_every_script_the_readme_names_is_smoke_run():
    import re

    named = set(re.findall(r"`((?:gpu/)?[a-z_]+\.(?:py|sh))", (BENCH / "README.md").read_text()))
    named = {n for n in named if (BENCH / n).is_file() and n != "common.py"}
    assert named >= {"bench_hooks.py", "bench_input.py", "bench_predict_memory.py", "service_capacity.py"}
    assert named <= set(SCRIPTS) | set(OTHER_SCRIPTS), named - set(SCRIPTS) - set(OTHER_SCRIPTS)
    # every runnable script on disk (helper modules have no `__main__`)
    on_disk = {p.name for p in BENCH.glob("*.py") if "__main__" in p.read_text()} - set(NOT_RUN_HERE)
    assert on_disk <= set(SCRIPTS) | set(OTHER_SCRIPTS), on_disk - set(SCRIPTS) - set(OTHER_SCRIPTS)
    # and the one-process smoke run runs each of them (run_all.py and gpu/run_gpu.sh have their own runs)
    assert set(_plan(Path("out"))) == set(SCRIPTS) | set(OTHER_SCRIPTS) - {"run_all.py", "gpu/run_gpu.sh"}


def _check_input_report(path: Path) -> None:
    text = path.read_text()
    for heading in ("# Input pipeline benchmarks", "## A. Fixed-size seed-002 records", "## B. JPEG",
                    "### Where the time goes", "## C. Faster options",
                    "## D. Real records: Fashion-MNIST (the fashion_mnist example's train.tfrecord, batch 128, "
                    "600 records in one file)", "## Notes"):
        assert heading in text, heading
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| pipeline")
            and not line.startswith("| up to stage")]
    assert len(rows) >= 19, text
    assert "target >= 0.95x bare (wall, median): " in text   # Part D measured (test.sh installs the dataset)
    for row in rows:   # every measured rate is a positive number
        rate = row.split("|")[2].strip().replace(",", "")
        assert float(rate) > 0, row


def _check_predict_memory(out: Path) -> None:
    """Each measure ran in a fresh process the script started (smoke: one for all) and reported its peak."""
    data = json.loads((out / "predict_memory.json").read_text())
    assert data["benchmark"] == "predict_memory" and data["smoke"] is True
    assert set(data["results"]) == {"floor", "stream_csv_40", "stream_csv_400", "stream_parquet_400"}
    assert data["results"]["stream_csv_400"]["rows"] == 400 and data["results"]["stream_csv_40"]["rows"] == 40
    for name, result in data["results"].items():
        assert result["peak_mb"] > 0 and math.isfinite(result["peak_over_import_mb"]), name
    ratio = data["ratios"]["peak stream large/small"]
    assert ratio["records"] == [400, 40] and ratio["median"] > 0
    [target] = data["targets"].values()
    assert isinstance(target["met"], bool)


def _check_service_capacity(stdout: str) -> None:
    """It read through a local tf.data service (JSON on stdout)."""
    data = json.loads(stdout[stdout.index("{"):])
    assert data["size"] == 16 and data["batch_size"] == 16
    for key in ("local_records_per_s", "service_records_per_s", "local_records_per_cpu_s",
                "service_records_per_cpu_s"):
        assert data[key] > 0, key
    assert len(data["rounds"]["local"]) == len(data["rounds"]["service"]) == 1


def _check_tables_speed(out: Path) -> None:
    """The Estimator and Keras sides took turns through the turnstile."""
    data = _check_result(out / "tables_speed.json", "tables_speed", ["configs", "workload"])
    assert data["results"]["workload"]["features"] == 20
    assert data["ratios"]["tpuestimator/keras"]["target"] == 1.0
    for name in ("tpuestimator", "keras"):
        _check_stats(data["results"]["configs"][name]["steps_per_sec"], name)


def test_gpu_script_dry_run_on_cpu(tmp_path, python_launcher):
    """benchmarks/gpu/run_gpu.sh runs end to end (on the CPU, tiny sizes) and writes its JSON."""
    out = tmp_path / "gpu"
    # each precision once, XLA once (with a mixed precision): on a CPU an XLA compile of the cnn's step
    # cost ~4-9 CPU s, and mixed_float16+jit (~13.5 CPU s) covered nothing its parts here do not
    env = dict(os.environ, GPU_BENCH_ALLOW_CPU="1", GPU_BENCH_SMOKE="1", GPU_BENCH_ROUNDS="1",
               GPU_BENCH_VARIANTS="float32,mixed_bfloat16+jit,mixed_float16", PYTHONPATH=str(REPO / "python"),
               GPU_BENCH_CHECK_TIMEOUT="300", GPU_BENCH_CNN_TIMEOUT="500", GPU_BENCH_LINEAR_TIMEOUT="300")
    # a loaded 2-core CPU, not an H200: TensorFlow's import alone took over 60 s at load 12
    # its three Pythons are forks of the module's TensorFlow server (module docstring)
    proc = subprocess.run(["bash", str(BENCH / "gpu" / "run_gpu.sh"), python_launcher, str(out)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    cnn = json.loads((out / "gpu_cnn.json").read_text())
    assert {"cnn@float32", "cnn@mixed_bfloat16+jit", "cnn@mixed_float16"} <= set(cnn["results"])
    assert cnn["results"]["cnn@mixed_bfloat16+jit"]["plan"]["jit_compile"] is True
    assert json.loads((out / "gpu_linear.json").read_text())["results"]["linear"]["configs"]


def test_run_all_smoke_passes_smoke_to_every_script():
    """`run_all.py --smoke` checks the scripts run in seconds to minutes: each script gets its
    own `--smoke` (bench_input.py without it built its full data sets: 20,000 records and
    2,400 photos) and writes outside benchmarks/."""
    sys.path.insert(0, str(BENCH))
    try:
        import run_all
    finally:
        sys.path.remove(str(BENCH))
    out = Path("/somewhere")
    for name in run_all.SCRIPTS:
        args = run_all._args(name, out, True)
        assert "--smoke" in args, name
        assert str(out) in " ".join(args), name
        assert "--smoke" not in run_all._args(name, out, False), name
