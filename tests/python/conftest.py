"""Shared pytest set-up.

- The CPU is split into 8 logical devices once per session (before TensorFlow starts), so
  tests can rehearse an 8-core TPU with `run.strategy: mirrored`; `cpu` stays one replica.
  Only where tests run: pytest-xdist's controller (`-n 3`) does not import TensorFlow at all.
- TensorFlow's idle threads sleep instead of spinning, in each test process and in the forks
  of `forked_python` (tensorflow_threads.py): with 3 workers on 2 cores the spins took the
  cores from the other workers.
- With TPUESTIMATOR_FORCE_TESTS=1 (CI sets it) a skipped test is reported as a failure:
  nothing is skipped silently in CI. That covers a whole file skipped while it is collected
  (a module-level `pytest.importorskip`, e.g. test_data_beam.py without apache_beam): pytest
  reports it as a skipped collection, not as skipped tests, so it is failed there too.
- Under pytest-xdist (scripts/test.sh runs `-n 3 --dist loadgroup`) the tests of a file
  with a fixture that outlives one test (a trained model, the main job) run together on one
  worker, so the fixture runs once; every other test is handed out on its own, so no worker
  is left alone with a long file (the benchmark smoke runs) at the end. `slow` tests are
  handed out first, in collection order (xdist would otherwise reorder groups by size).
- The objects of a test process as collected are frozen (`gc.freeze`, after TensorFlow's and
  every test module's import): the garbage collector's full collections no longer walk them.
  In a run of test_tables, test_estimator and test_export_jobs, alternating, 44-46 CPU s
  against 50-52 without it. A test of freezing itself takes `unfrozen_heap`.
- Stress mode: ``TPUESTIMATOR_STRESS=N`` runs every test marked ``real_process`` (real
  clusters, killed processes, full disks, fresh processes: the tests whose outcome can
  depend on timing) N times, as N parametrized copies ``[stress1]`` ... ``[stressN]``; a module
  fixture that takes ``stress_round`` runs once per round.
- `forked_python`: a `python` whose runs are forks of a server that imported TensorFlow once
  (fork_python.py). A test that starts a CLI or cluster process takes it instead of
  `sys.executable` unless the process's start-up is what it tests (an import that must not
  happen, `--version`, the wheel install, the main command's set-up) or it finds the process by
  what a fork does not share (its id given to a message, its environment in /proc).
"""
from __future__ import annotations

import gc
import os
import re
import signal
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
sys.path.insert(0, str(REPO / "python"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

NUM_LOGICAL_CPUS = 8
STRESS_ENV = "TPUESTIMATOR_STRESS"


def stress_repetitions(environ=None) -> int:
    """How many times stress mode runs each `real_process` test (1 when it is off)."""
    raw = (os.environ if environ is None else environ).get(STRESS_ENV, "").strip()
    if not raw:
        return 1
    if not raw.isdigit() or int(raw) < 1:
        raise pytest.UsageError(f"{STRESS_ENV}={raw!r}: expected a whole number of repetitions, 1 or more "
                                f"(e.g. {STRESS_ENV}=20), or unset for one run of each test")
    return int(raw)


def runs_tests(config) -> bool:
    """False in pytest-xdist's controller process, which hands tests to its workers and runs none."""
    return hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None)


def pytest_configure(config):
    if not runs_tests(config):   # TensorFlow's import, ~5 CPU s before any worker starts, served nothing there
        return
    import tensorflow as tf

    import tensorflow_threads

    tensorflow_threads.stop_thread_spinning()
    cpu = tf.config.list_physical_devices("CPU")[0]
    if not tf.config.get_logical_device_configuration(cpu):
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * NUM_LOGICAL_CPUS)


def pytest_generate_tests(metafunc):
    repetitions = stress_repetitions()
    if repetitions > 1 and metafunc.definition.get_closest_marker("real_process"):
        if "stress_round" not in metafunc.fixturenames:
            metafunc.fixturenames.append("stress_round")
        # module scope: a module fixture taking `stress_round` (the fault-injection chains) runs
        # again in every round; with the function scope it ran once for all N rounds
        metafunc.parametrize("stress_round", range(1, repetitions + 1), ids=lambda i: f"stress{i}", scope="module")


@pytest.fixture(scope="module")
def stress_round() -> int:
    """The stress-mode round (1 outside stress mode, where nothing parametrizes it)."""
    return 1


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)   # stable: file order kept otherwise


def pytest_collection_finish(session):
    """The heap as collected (TensorFlow, Keras, pandas, the test modules: ~370k objects) frozen
    (`gc.freeze`): every full collection of the session (the collector's own, TensorFlow's
    converter's, the tests') walked it again. About 10% of the CPU of the files measured
    (module docstring)."""
    if runs_tests(session.config):
        gc.collect()
        gc.freeze()


@pytest.fixture
def unfrozen_heap():
    """The session's frozen heap (`pytest_collection_finish`) thawed for a test of what freezing
    does; frozen again after it (with what the test's module fixtures still hold: kept until
    the process ends, a trained model's worth at most)."""
    frozen = gc.get_freeze_count()
    gc.unfreeze()
    yield
    if frozen:
        gc.collect()
        gc.freeze()


SHARED_FIXTURE = re.compile(r"""scope\s*=\s*["'](module|class|package|session)["']""")


def shares_fixtures(test_file: Path) -> bool:
    """The file defines a fixture that outlives one test: its tests must run on one worker."""
    return test_file.suffix == ".py" and bool(SHARED_FIXTURE.search(test_file.read_text()))


@pytest.hookimpl(optionalhook=True)   # a pytest-xdist hook: unknown without it
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup`: xdist's own grouping (the `xdist_group` mark) rewrites node ids,
    which pytest 9 no longer lets it do; this scheduler groups by file instead, for the files
    that need it (module docstring)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # keep the collection order: slow tests first

    class FileGroupScheduling(LoadScopeScheduling):
        grouped: dict[str, bool] = {}

        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            if path not in self.grouped:
                self.grouped[path] = shares_fixtures(config.rootpath / path)
            return path if self.grouped[path] else nodeid

    return FileGroupScheduling(config, log)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("TPUESTIMATOR_FORCE_TESTS") == "1" and call.excinfo is not None:
        report.outcome = "failed"
        report.longrepr = f"skipped under TPUESTIMATOR_FORCE_TESTS=1 (skips are failures in CI): {call.excinfo.value}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("TPUESTIMATOR_FORCE_TESTS") == "1":
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = (f"{collector.nodeid}: skipped while collected under TPUESTIMATOR_FORCE_TESTS=1 (skips are "
                           f"failures in CI): {reason}")


@pytest.fixture
def ctrl_c_raises():
    """SIGINT with Python's default handler (KeyboardInterrupt) for the test, as in a terminal:
    pytest started in the background of a script (`cmd &`) has SIGINT ignored, and its workers
    with it; the handler before is put back after."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture
def repo_root() -> Path:
    return REPO


def cli_env() -> dict:
    """The environment `python_env` gives (the fork server's too)."""
    from helpers import without_sklearn

    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "python") + os.pathsep + env.get("PYTHONPATH", "")
    env = without_sklearn(env)
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return env


@pytest.fixture
def python_env() -> dict:
    """Environment for subprocesses running the CLI from this checkout, as on the core install:
    scikit-learn (a dev extra, for the tests' own answers) hidden, so Keras does not import it
    (about 2 CPU s of each process; tests/python/without_sklearn)."""
    return cli_env()


@pytest.fixture(scope="session")
def forked_python(tmp_path_factory) -> str:
    """A `python` (its path) whose runs are forks of a server that imported TensorFlow once
    (fork_python.py; one server per pytest process, so per xdist worker, started when a test
    first asks): for the CLI-subprocess tests whose process is real (its signals, kills, exit
    status, files, cluster tasks) but whose TensorFlow import (~5-7 CPU s each) is not what
    they test. A run started with `python_env` behaves as `sys.executable` with it would
    (fork_python.py's docstring says how, and what differs: the run's id is not the launcher's)."""
    import fork_python

    server, launcher = fork_python.start(tmp_path_factory.mktemp("fork-python"), cli_env())
    yield str(launcher)
    fork_python.stop(server)


@pytest.fixture(scope="module", autouse=True)
def table_tests_work_in_tmp(request, tmp_path_factory):
    """`train_table` records its run in ``runs/`` of the working folder (as every job does), so
    the table tests (and their module-scoped trained models) work in a temporary folder."""
    if not Path(str(request.node.fspath)).name.startswith("test_tables"):
        yield
        return
    before = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("tables-cwd"))
    try:
        yield
    finally:
        os.chdir(before)
