"""HTML run reports: self-contained, and rendered by headless Chromium without script errors."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from tpuestimator.runs import RunRecorder, write_compare_report, write_run_report
from tpuestimator.runs.plots import line_chart_svg, metric_groups, nice_ticks, run_series


def make_run(runs_dir: Path, *, lr: float, fail: bool = False) -> Path:
    rec = RunRecorder.create(runs_dir, config={"model": "cnn", "train": {"max_steps": 40, "batch_size": 8}},
                             flags={"learning_rate": lr, "layers": [8, 4]}, script="job.yaml", planned_rows=4)
    for i in range(3):
        rec.log_metrics(10 * (i + 1), {"loss": 1.0 / (i + 1) + lr}, eval_metrics={"loss": 1.1 / (i + 1), "accuracy": 0.5 + 0.1 * i})
    rec.set_properties(model="Model: \"cnn\"\n conv2d (Conv2D)   (None, 8, 8, 4)   40")
    (rec.run_dir / "output.log").write_text("step 10 loss 1.0 <script>alert(1)</script>\n")
    rec.write_evaluation({"loss": 0.4, "accuracy": 0.7})
    if fail:
        rec.fail(RuntimeError("device lost <b>"))
    else:
        rec.complete()
    return rec.run_dir


def test_run_report_is_self_contained(tmp_path):
    run_dir = make_run(tmp_path / "runs", lr=0.1, fail=True)
    page = write_run_report(run_dir, tmp_path / "r.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page.replace("&lt;script&gt;", "")  # the log's text is escaped, no script runs
    urls = set(re.findall(r"https?://[^\"' )]+", page))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls  # no CDN, no network
    assert page.count("<svg") == 2  # loss (+val_loss) and accuracy (val_accuracy)
    assert "val_loss" in page and "learning_rate" in page and "[8, 4]" in page
    assert "conv2d (Conv2D)" in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "RuntimeError: device lost &lt;b&gt;" in page and 'class="badge failed"' in page
    assert "data:image/png;base64," in page  # plots/ embedded


def test_compare_report(tmp_path):
    a = make_run(tmp_path / "a", lr=0.1)
    b = make_run(tmp_path / "b", lr=0.2)
    page = write_compare_report(a, b, tmp_path / "c.html").read_text()
    assert "Flags (1 differ)" in page and page.count("<svg") == 2
    assert page.count('stroke-dasharray="6 4"') >= 2  # val_ curves dashed, for both runs


def test_chart_geometry():
    assert nice_ticks(0, 1) == pytest.approx([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    assert nice_ticks(100, 300) == [100, 150, 200, 250, 300]
    groups = dict(metric_groups({"step": [1, 2, None], "loss": [1, None, None], "val_loss": [2, 1, None]}))
    assert groups["loss"]["val_loss"] == ([1, 2], [2, 1])  # padding rows dropped
    svg = line_chart_svg("loss", run_series({"step": [1, 2], "loss": [float("nan"), None]})[0][1])
    assert "no values" in svg


CONSOLE_ERROR = re.compile(r"Uncaught|:CONSOLE[:(]")


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _require_chromium() -> str:
    exe = _chromium()
    if exe is None:
        message = "chromium is not installed (apt-get install -y chromium)"
        if os.environ.get("TPUESTIMATOR_FORCE_TESTS") == "1":
            pytest.fail(message + "; TPUESTIMATOR_FORCE_TESTS=1 turns this skip into a failure")
        pytest.skip(message)
    return exe


def render(exe: str, page: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    args = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={tmp_path / 'chromium-profile'}", "--enable-logging=stderr", "--v=0",
            *extra, f"file://{page}"]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("kind", ["run", "compare"])
def test_reports_render_in_headless_chromium(tmp_path, kind):
    exe = _require_chromium()
    a = make_run(tmp_path / "runs", lr=0.1, fail=kind == "run")
    page = tmp_path / f"{kind}.html"
    if kind == "run":
        write_run_report(a, page)
        charts = 2
    else:
        write_compare_report(a, make_run(tmp_path / "runs2", lr=0.3), page)
        charts = 2
    shot = tmp_path / "shot.png"
    done = render(exe, page, tmp_path, f"--screenshot={shot}", "--window-size=1200,1600")
    assert done.returncode == 0, done.stderr[-2000:]
    assert not CONSOLE_ERROR.search(done.stderr), done.stderr
    with Image.open(shot) as img:
        assert img.size == (1200, 1600)
        colors = img.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colors is not None and len(colors) > 50  # a drawn page, not a blank one
    dom = render(exe, page, tmp_path, "--dump-dom")
    assert dom.returncode == 0
    assert dom.stdout.count("<svg") == charts and dom.stdout.count("<polyline") >= charts


def test_console_error_detection_works(tmp_path):
    """The check above is not vacuous: a page whose script throws is caught."""
    exe = _require_chromium()
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>undefinedFunction();</script></body></html>")
    done = render(exe, page, tmp_path, f"--screenshot={tmp_path / 'bad.png'}", "--window-size=400,300")
    assert CONSOLE_ERROR.search(done.stderr)


def test_padding_rows_with_planned_x_are_not_drawn():
    # metrics.json's padding rows carry their planned global step under 'epoch' (tfruns's x
    # axis must not hold null) but no values: the plots leave them out
    groups = dict(metric_groups({"epoch": [100, 200, 300], "loss": [1.0, 0.5, None], "val_loss": [1.1, None, None]}))
    assert groups["loss"]["loss"] == ([100, 200], [1.0, 0.5])
    assert groups["loss"]["val_loss"] == ([100, 200], [1.1, None])
