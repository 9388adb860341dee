"""Run reports: a text summary for the terminal and a self-contained HTML page.

The HTML has no script, no CDN and no network access: charts are inline SVG, plots are
embedded PNG (data: URLs), styles are inline. `render_*` return strings; `write_*` write
them atomically.
"""
from __future__ import annotations

import base64
import datetime as _dt
import html
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tpuestimator.runs.plots import PALETTE, Series, line_chart_svg, metric_groups, run_series
from tpuestimator.runs.reading import run_info
from tpuestimator.system.io import atomic_write_text

OUTPUT_LIMIT = 100_000  # characters of output.log shown (the tail)
_TEXT_PROPERTIES_HIDDEN = ("model",)  # shown in their own section

_CSS = """
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:0;color:#222;background:#f6f7f9}
header{background:#24292f;color:#fff;padding:18px 28px}
header h1{margin:0;font-size:22px;font-weight:600}
header .sub{color:#c9d1d9;font-size:13px;margin-top:6px}
main{padding:18px 28px;max-width:1200px}
section{background:#fff;border:1px solid #d8dee4;border-radius:6px;padding:14px 18px;margin-bottom:16px}
h2{font-size:16px;margin:0 0 10px 0}
table{border-collapse:collapse;font-size:13px}
td,th{border-bottom:1px solid #eaeef2;padding:4px 12px 4px 0;text-align:left;vertical-align:top}
th{color:#57606a;font-weight:600}
td{font-variant-numeric:tabular-nums}
tr.diff td{background:#fff8c5}
pre{background:#f6f8fa;border:1px solid #eaeef2;border-radius:4px;padding:10px;font-size:12px;overflow:auto;max-height:480px;white-space:pre}
.badge{display:inline-block;border-radius:10px;padding:2px 10px;font-size:12px;font-weight:600;margin-left:10px;vertical-align:middle}
.completed{background:#2da44e;color:#fff}.failed{background:#cf222e;color:#fff}
.running{background:#0969da;color:#fff}.interrupted{background:#9a6700;color:#fff}
.cards{display:flex;flex-wrap:wrap;gap:12px}
.card{border:1px solid #d8dee4;border-radius:6px;padding:8px 14px;min-width:120px;background:#fff}
.card .v{font-size:22px;font-weight:600}.card .k{font-size:12px;color:#57606a}
.charts{display:flex;flex-wrap:wrap;gap:12px}
.error{border-color:#cf222e}.error h2{color:#cf222e}
img.plot{max-width:100%;border:1px solid #eaeef2;margin:4px}
details summary{cursor:pointer;font-weight:600;margin:4px 0}
.muted{color:#57606a;font-size:12px}
"""


def _esc(value: Any) -> str:
    return html.escape(str(value))


def format_time(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return _dt.datetime.fromtimestamp(epoch, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def format_duration(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return "-"
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return f"{value:.6g}"
    if value is None:
        return "-"
    return str(value)


def _table(rows: Sequence[Sequence[Any]], header: Sequence[str] | None = None,
           diff_rows: set[int] | None = None) -> str:
    out = ["<table>"]
    if header:
        out.append("<tr>" + "".join(f"<th>{_esc(h)}</th>" for h in header) + "</tr>")
    for i, row in enumerate(rows):
        cls = ' class="diff"' if diff_rows and i in diff_rows else ""
        cells = [f"<td>{_esc(format_value(cell))}</td>" for cell in row]
        out.append(f"<tr{cls}>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _page(title: str, header_html: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{_esc(title)}</title>"
            f"<style>{_CSS}</style></head><body><header>{header_html}</header><main>{body}</main></body></html>\n")


def _status_badge(status: str) -> str:
    return f'<span class="badge {_esc(status)}">{_esc(status)}</span>'


def _png_data_url(path: str) -> str | None:
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def _tail(text: str, limit: int = OUTPUT_LIMIT) -> tuple[str, bool]:
    return (text[-limit:], True) if len(text) > limit else (text, False)


def render_run_report(info: Mapping[str, Any]) -> str:
    """The HTML report of one run (`info` from `run_info()`)."""
    props = info["properties"]
    status = info["status"]
    header = (f"<h1>Run {_esc(info['name'])}{_status_badge(status)}</h1>"
              f"<div class=\"sub\">{_esc(props.get('script', ''))} &middot; started {_esc(format_time(props.get('start')))}"
              f" &middot; duration {_esc(format_duration(info.get('duration')))}</div>")
    body = []
    evaluation = info.get("evaluation") or {}
    if evaluation:
        cards = "".join(f'<div class="card"><div class="v">{_esc(format_value(v))}</div><div class="k">{_esc(k)}</div></div>'
                        for k, v in evaluation.items())
        body.append(f'<section id="evaluation"><h2>Evaluation</h2><div class="cards">{cards}</div></section>')
    error = info.get("error")
    if isinstance(error, Mapping):
        tb = "\n".join(str(f) for f in error.get("traceback") or [])
        body.append(f'<section class="error" id="error"><h2>Error</h2><pre>{_esc(error.get("message", ""))}</pre>'
                    + (f"<details><summary>Traceback</summary><pre>{_esc(tb)}</pre></details>" if tb else "")
                    + "</section>")
    charts = run_series(info.get("metrics") or {})
    if charts:
        svgs = "".join(line_chart_svg(name, series) for name, series in charts)
        body.append(f'<section id="metrics"><h2>Metrics</h2><div class="charts">{svgs}</div></section>')
    flags = info.get("flags") or {}
    if flags:
        body.append(f'<section id="flags"><h2>Flags</h2>{_table(sorted(flags.items()), ("flag", "value"))}</section>')
    prop_rows = []
    for key in ("start", "end"):
        if key in props:
            prop_rows.append((key, format_time(props[key])))
    prop_rows += [(k, v) for k, v in sorted(props.items())
                  if k not in ("start", "end") and k not in _TEXT_PROPERTIES_HIDDEN]
    body.append(f'<section id="properties"><h2>Properties</h2>{_table(prop_rows, ("property", "value"))}</section>')
    model = props.get("model")
    if isinstance(model, str) and model.strip():
        body.append(f'<section id="model"><h2>Model</h2><pre>{_esc(model)}</pre></section>')
    output = info.get("output")
    if output:
        text, cut = _tail(output)
        note = f'<p class="muted">last {OUTPUT_LIMIT:,} characters</p>' if cut else ""
        body.append(f'<section id="output"><h2>Output</h2>{note}<pre>{_esc(text)}</pre></section>')
    plots = [(Path(p).name, _png_data_url(p)) for p in info.get("plots") or []]
    plots = [(n, u) for n, u in plots if u]
    if plots:
        imgs = "".join(f'<img class="plot" alt="{_esc(n)}" src="{u}">' for n, u in plots)
        body.append(f'<section id="plots"><details><summary>Plots ({len(plots)})</summary>{imgs}</details></section>')
    source = info.get("source") or {}
    if source:
        files = "".join(f"<details><summary>{_esc(n)}</summary><pre>{_esc(t)}</pre></details>" for n, t in source.items())
        body.append(f'<section id="source"><h2>Source</h2>{files}</section>')
    artifacts = info.get("artifacts") or []
    if artifacts:
        shown = artifacts[:200]
        more = f"<li>... and {len(artifacts) - 200} more</li>" if len(artifacts) > 200 else ""
        items = "".join(f"<li>{_esc(a)}</li>" for a in shown)
        body.append(f'<section id="files"><h2>Files</h2><ul>{items}{more}</ul>'
                    f'<p class="muted">{_esc(info["run_dir"])}</p></section>')
    return _page(f"Run {info['name']}", header, "".join(body))


def _overlay_charts(a: Mapping[str, Any], b: Mapping[str, Any], labels: tuple[str, str]) -> list[str]:
    ga = dict(metric_groups(a.get("metrics") or {}))
    gb = dict(metric_groups(b.get("metrics") or {}))
    names = list(ga) + [n for n in gb if n not in ga]
    svgs = []
    for name in names:
        series = []
        for i, (groups, label) in enumerate(((ga, labels[0]), (gb, labels[1]))):
            for array_name, (xs, ys) in (groups.get(name) or {}).items():
                series.append(Series(f"{label} {array_name}", xs, ys, PALETTE[i * 3 % len(PALETTE)],
                                     dashed=array_name.startswith("val_")))
        svgs.append(line_chart_svg(name, series))
    return svgs


def _diff_rows(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[list[tuple], set[int]]:
    keys = sorted(set(a) | set(b))
    rows, diffs = [], set()
    for i, key in enumerate(keys):
        va, vb = a.get(key), b.get(key)
        rows.append((key, va, vb))
        if va != vb:
            diffs.add(i)
    return rows, diffs


def render_compare_report(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    """The HTML comparison of two runs (each from `run_info()`): flags diff, evaluation, overlaid curves."""
    la, lb = "A", "B"
    header = (f"<h1>Compare runs</h1><div class=\"sub\">A = {_esc(a['name'])}{_status_badge(a['status'])}"
              f" &nbsp; B = {_esc(b['name'])}{_status_badge(b['status'])}</div>")
    body = []
    ea, eb = a.get("evaluation") or {}, b.get("evaluation") or {}
    if ea or eb:
        rows = []
        for key in list(ea) + [k for k in eb if k not in ea]:
            va, vb = ea.get(key), eb.get(key)
            delta = vb - va if isinstance(va, (int, float)) and isinstance(vb, (int, float)) else None
            rows.append((key, va, vb, delta))
        body.append(f'<section id="evaluation"><h2>Evaluation</h2>{_table(rows, ("metric", la, lb, "B - A"))}</section>')
    svgs = _overlay_charts(a, b, (la, lb))
    if svgs:
        body.append(f'<section id="metrics"><h2>Metrics</h2><p class="muted">A solid, B in its own colour; '
                    f'evaluation (val_) curves dashed.</p><div class="charts">{"".join(svgs)}</div></section>')
    rows, diffs = _diff_rows(a.get("flags") or {}, b.get("flags") or {})
    n_diff = len(diffs)
    body.append(f'<section id="flags"><h2>Flags ({n_diff} differ)</h2>{_table(rows, ("flag", la, lb), diffs)}</section>')
    pa, pb = dict(a["properties"]), dict(b["properties"])
    for p in (pa, pb):
        for key in ("start", "end"):
            if key in p:
                p[key] = format_time(p[key])
        for key in _TEXT_PROPERTIES_HIDDEN:
            p.pop(key, None)
    pa["duration"], pb["duration"] = format_duration(a.get("duration")), format_duration(b.get("duration"))
    rows, diffs = _diff_rows(pa, pb)
    body.append(f'<section id="properties"><h2>Properties</h2>{_table(rows, ("property", la, lb), diffs)}</section>')
    for info, label in ((a, la), (b, lb)):
        error = info.get("error")
        if isinstance(error, Mapping):
            body.append(f'<section class="error"><h2>Error in {label}</h2><pre>{_esc(error.get("message", ""))}</pre></section>')
    return _page(f"Compare {a['name']} and {b['name']}", header, "".join(body))


def write_run_report(run: str | os.PathLike, out: str | os.PathLike, runs_dir: str | os.PathLike = "runs") -> Path:
    """Writes the HTML report of `run` (name, path or ``latest``) to `out`."""
    out = Path(out)
    atomic_write_text(out, render_run_report(run_info(run, runs_dir)))
    return out


def write_compare_report(run_a: str | os.PathLike, run_b: str | os.PathLike, out: str | os.PathLike,
                         runs_dir: str | os.PathLike = "runs") -> Path:
    """Writes the HTML comparison of two runs to `out`."""
    out = Path(out)
    atomic_write_text(out, render_compare_report(run_info(run_a, runs_dir), run_info(run_b, runs_dir)))
    return out


# --------------------------------------------------------------------------- text
def format_run_text(info: Mapping[str, Any]) -> str:
    """A terminal summary of one run."""
    props = info["properties"]
    lines = [f"Run {info['name']}  [{info['status']}]", f"  folder:   {info['run_dir']}",
             f"  script:   {props.get('script', '-')}",
             f"  started:  {format_time(props.get('start'))}   duration: {format_duration(info.get('duration'))}"]
    if "global_step" in props or "max_steps" in props or "steps" in props:
        lines.append(f"  steps:    {props.get('global_step', '-')} of {props.get('max_steps', props.get('steps', '-'))}")
    for key in ("strategy", "device", "num_replicas", "tensorflow_version", "git_commit"):
        if key in props:
            lines.append(f"  {key + ':':<10}" + ("" if len(key) < 9 else " ") + str(props[key]))
    evaluation = info.get("evaluation") or {}
    if evaluation:
        lines.append("Evaluation:")
        lines += [f"  {k:<24} {format_value(v)}" for k, v in evaluation.items()]
    metrics = info.get("metrics") or {}
    if metrics:
        lines.append("Metrics (last value):")
        for key, values in metrics.items():
            last = next((v for v in reversed(values or []) if v is not None), None)
            count = sum(v is not None for v in values or [])
            lines.append(f"  {key:<24} {format_value(last):<12} ({count} of {len(values or [])})")
    flags = info.get("flags") or {}
    if flags:
        lines.append("Flags:")
        lines += [f"  {k:<24} {format_value(v)}" for k, v in sorted(flags.items())]
    error = info.get("error")
    if isinstance(error, Mapping):
        lines.append("Error:")
        lines.append("  " + str(error.get("message", "")).replace("\n", "\n  "))
    if info.get("artifacts"):
        lines.append(f"Files: {len(info['artifacts'])} (plots: {len(info.get('plots') or [])})")
    return "\n".join(lines)


def format_compare_text(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    """A terminal comparison: flags that differ, evaluation side by side."""
    lines = [f"A: {a['name']}  [{a['status']}]", f"B: {b['name']}  [{b['status']}]"]
    rows, diffs = _diff_rows(a.get("flags") or {}, b.get("flags") or {})
    lines.append(f"Flags that differ ({len(diffs)} of {len(rows)}):")
    if not diffs:
        lines.append("  (none)")
    for i in sorted(diffs):
        key, va, vb = rows[i]
        lines.append(f"  {key:<28} {format_value(va):<16} {format_value(vb)}")
    ea, eb = a.get("evaluation") or {}, b.get("evaluation") or {}
    if ea or eb:
        lines.append("Evaluation:" + " " * 20 + f"{'A':<16} {'B':<16} B - A")
        for key in list(ea) + [k for k in eb if k not in ea]:
            va, vb = ea.get(key), eb.get(key)
            delta = format_value(vb - va) if isinstance(va, (int, float)) and isinstance(vb, (int, float)) else "-"
            lines.append(f"  {key:<28} {format_value(va):<16} {format_value(vb):<16} {delta}")
    lines.append(f"Duration: A {format_duration(a.get('duration'))}, B {format_duration(b.get('duration'))}")
    return "\n".join(lines)
