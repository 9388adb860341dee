"""`tpuestimator runs ls/show/compare/clean` on real run folders."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tpuestimator.commands import runs as runs_cmd
from tpuestimator.runs import RunRecorder


def make_run(runs_dir: Path, name: str, *, lr: float, acc: float, failed: bool = False) -> Path:
    rec = RunRecorder.create(runs_dir.parent / f"scratch-{name}", config={"train": {"max_steps": 20}},
                             flags={"learning_rate": lr, "optimizer": {"name": "adam"}}, script="job.yaml",
                             planned_rows=2)
    rec.log_metrics(10, {"loss": 1.0}, eval_metrics={"accuracy": acc - 0.1})
    rec.log_metrics(20, {"loss": 0.5}, eval_metrics={"accuracy": acc})
    rec.write_evaluation({"accuracy": acc})
    if failed:
        rec.fail(RuntimeError("out of memory"), plots=False)
    else:
        rec.complete(plots=False)
    runs_dir.mkdir(parents=True, exist_ok=True)
    os.rename(rec.run_dir, runs_dir / name)
    return runs_dir / name


@pytest.fixture
def runs(tmp_path) -> Path:
    runs_dir = tmp_path / "runs"
    make_run(runs_dir, "2026-11-29T10-00-01Z", lr=0.1, acc=0.7)
    make_run(runs_dir, "2026-11-29T10-00-02Z", lr=0.01, acc=0.9)
    return runs_dir


def test_ls_table_and_json(runs, capsys):
    assert runs_cmd.main(["ls", "--runs-dir", str(runs)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["run", "eval_accuracy", "flag_learning_rate", "steps", "duration", "status"]
    assert lines[1].split()[:3] == ["2026-11-29T10-00-02Z", "0.9", "0.01"]  # newest first
    assert lines[1].split()[3] == "20/20" and lines[1].split()[-1] == "completed"
    assert runs_cmd.main(["ls", "--runs-dir", str(runs), "--sort", "eval_accuracy", "--ascending", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["eval_accuracy"] for r in rows] == [0.7, 0.9]
    assert runs_cmd.main(["ls", "--runs-dir", str(runs), "--filter", "learning_rate=0.1", "--latest", "5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[1].startswith("2026-11-29T10-00-01Z")
    assert runs_cmd.main(["ls", "--runs-dir", str(runs), "--filter", "oops"]) == 2
    assert "column=value" in capsys.readouterr().err
    assert runs_cmd.main(["ls", "--runs-dir", str(runs.parent / "none")]) == 0
    assert "No runs" in capsys.readouterr().out


def test_ls_check_exit_code(runs, capsys):
    assert runs_cmd.main(["ls", "--runs-dir", str(runs), "--check"]) == 0
    assert "all valid" in capsys.readouterr().out
    (runs / "2026-11-29T10-00-01Z" / "tfruns.d" / "flags.json").write_text('{"lr": NaN}')
    assert runs_cmd.main(["ls", "--runs-dir", str(runs), "--check"]) == 1
    out = capsys.readouterr().out
    assert "1 invalid" in out and "rule 3" in out


def test_show_text_and_html(runs, tmp_path, capsys):
    assert runs_cmd.main(["show", "--runs-dir", str(runs)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Run 2026-11-29T10-00-02Z  [completed]")
    assert "optimizer.name" in out and "val_accuracy" in out
    html_path = tmp_path / "report.html"
    assert runs_cmd.main(["show", "2026-11-29T10-00-01Z", "--runs-dir", str(runs), "--html", str(html_path)]) == 0
    assert "Report written" in capsys.readouterr().out
    assert "<svg" in html_path.read_text()
    assert runs_cmd.main(["show", "missing", "--runs-dir", str(runs)]) == 1
    assert "'missing' not found" in capsys.readouterr().err


def test_compare_text_and_html(runs, tmp_path, capsys):
    out_html = tmp_path / "cmp.html"
    assert runs_cmd.main(["compare", "--runs-dir", str(runs), "--html", str(out_html)]) == 0
    out = capsys.readouterr().out
    assert "A: 2026-11-29T10-00-01Z" in out and "B: 2026-11-29T10-00-02Z" in out  # older = A
    assert "Flags that differ (1 of 2)" in out and "learning_rate" in out
    page = out_html.read_text()
    assert "Flags (1 differ)" in page and page.count("<svg") >= 2
    assert runs_cmd.main(["compare", "latest", "2026-11-29T10-00-01Z", "--runs-dir", str(runs)]) == 0
    assert "A: 2026-11-29T10-00-02Z" in capsys.readouterr().out
    assert runs_cmd.main(["compare", "a", "b", "c", "--runs-dir", str(runs)]) == 2


def test_clean(runs, capsys, monkeypatch):
    assert runs_cmd.main(["clean", "2026-11-29T10-00-01Z", "--runs-dir", str(runs)]) == 0
    assert (runs / "archive" / "2026-11-29T10-00-01Z").is_dir()
    capsys.readouterr()
    monkeypatch.setattr(sys, "stdin", open(os.devnull))  # not a TTY: all runs needs --yes
    assert runs_cmd.main(["clean", "--runs-dir", str(runs)]) == 2
    assert "--yes" in capsys.readouterr().err
    assert runs_cmd.main(["clean", "--runs-dir", str(runs), "--yes"]) == 0
    assert not (runs / "2026-11-29T10-00-02Z").exists()


def test_cli_modules_do_not_import_tensorflow(python_env):
    code = ("import sys, tpuestimator.commands.runs, tpuestimator.commands.tensorboard, tpuestimator.runs, "
            "tpuestimator.runs.tensorboard; sys.exit(1 if 'tensorflow' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code], env=python_env).returncode == 0


def test_runs_through_the_tpuestimator_cli(runs, python_env):
    done = subprocess.run([sys.executable, "-m", "tpuestimator.cli", "runs", "ls", "--runs-dir", str(runs)],
                          env=python_env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "2026-11-29T10-00-02Z" in done.stdout


def test_main_in_process_gets_each_calls_verbosity_and_leaves_logging_as_it_found_it(runs, monkeypatch):
    """A notebook or program calling `tpuestimator.cli.main` twice: each call logs at its own -v
    (INFO, then DEBUG with -vv), and afterwards the root logger, the libraries' loggers and
    TF_CPP_MIN_LOG_LEVEL are what they were before the first."""
    import logging

    from tpuestimator import cli

    root = logging.getLogger()
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    monkeypatch.setattr(root, "level", logging.ERROR)
    logging.getLogger("absl").setLevel(logging.NOTSET)
    before = (root.level, list(root.handlers), [logging.getLogger(n).level for n in ("absl", "tensorflow")])
    seen = []   # (message, the root's level while the command ran)

    class Probe(logging.Handler):
        def emit(self, record):
            seen.append((record.getMessage().split(" ")[0], logging.getLogger().level))

    probe = Probe(level=logging.DEBUG)
    logging.getLogger("tpuestimator").addHandler(probe)
    try:
        assert cli.main(["runs", "clean", "2026-11-29T10-00-01Z", "--runs-dir", str(runs)]) == 0
        assert "TF_CPP_MIN_LOG_LEVEL" not in os.environ
        assert cli.main(["-vv", "runs", "clean", "2026-11-29T10-00-02Z", "--runs-dir", str(runs)]) == 0
    finally:
        logging.getLogger("tpuestimator").removeHandler(probe)
    assert seen == [("Archived", logging.INFO), ("Archived", logging.DEBUG)]
    after = (root.level, list(root.handlers), [logging.getLogger(n).level for n in ("absl", "tensorflow")])
    assert after == before
    assert "TF_CPP_MIN_LOG_LEVEL" not in os.environ
