"""Metric curves of runs: inline SVG for the HTML reports, PNG (Pillow) for ``plots/``.

No matplotlib: the charts are simple line charts (one per metric, the training curve and
the ``val_`` curve together), drawn from the same geometry in both formats.
"""
from __future__ import annotations

import dataclasses
import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from tpuestimator.runs.values import EVAL_PREFIX, STEP_KEY

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")


@dataclasses.dataclass(frozen=True)
class Series:
    """One curve: points with None for gaps (a null metric), drawn solid or dashed."""

    label: str
    xs: Sequence[float]
    ys: Sequence[float | None]
    color: str = PALETTE[0]
    dashed: bool = False

    def points(self) -> list[tuple[float, float] | None]:
        """(x, y) pairs with None where a gap breaks the line."""
        out: list[tuple[float, float] | None] = []
        for x, y in zip(self.xs, self.ys):
            ok = x is not None and y is not None and math.isfinite(x) and math.isfinite(y)
            out.append((float(x), float(y)) if ok else None)
        return out


def metric_groups(arrays: Mapping[str, Sequence[float | None]]) -> list[tuple[str, dict[str, tuple[list, list]]]]:
    """Groups metrics.json arrays into charts: ``loss`` with ``val_loss``, ``accuracy`` ...

    Returns:
      [(metric name, {array name: (xs, ys)})], in first-seen order. The x axis is the
      ``step`` array when present (the row number otherwise); padding rows are left out.
    """
    names = [n for n in arrays if n not in (STEP_KEY, "epoch")]
    if not names:
        return []
    length = max(len(v) for v in arrays.values())
    xs_all = list(arrays.get(STEP_KEY) or arrays.get("epoch") or [])
    if len(xs_all) < length:
        xs_all += [None] * (length - len(xs_all))
    if not any(x is not None for x in xs_all):
        xs_all = list(range(1, length + 1))
    recorded = 1 + max((i for name in names for i, v in enumerate(arrays[name]) if v is not None), default=-1)
    groups: dict[str, dict[str, tuple[list, list]]] = {}
    for name in names:
        base = name[len(EVAL_PREFIX):] if name.startswith(EVAL_PREFIX) else name
        ys = list(arrays[name]) + [None] * (length - len(arrays[name]))
        # rows after the last recorded one are padding (their x is only planned): left out
        keep = [i for i in range(min(length, recorded)) if xs_all[i] is not None]
        groups.setdefault(base, {})[name] = ([xs_all[i] for i in keep], [ys[i] for i in keep])
    return list(groups.items())


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About `count` round tick values covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0]
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, count)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks = []
    t = first
    while t <= hi + step * 1e-9 and len(ticks) < 50:
        ticks.append(round(t, 12))
        t += step
    return ticks or [lo]


def format_tick(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1e5 or abs(value) < 1e-3:
        return f"{value:.1e}"
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.4g}"


@dataclasses.dataclass(frozen=True)
class _Frame:
    """Maps data coordinates to pixels inside the plot area."""

    x0: float
    x1: float
    y0: float
    y1: float
    left: float
    top: float
    width: float
    height: float

    def px(self, x: float) -> float:
        span = self.x1 - self.x0 or 1.0
        return self.left + (x - self.x0) / span * self.width

    def py(self, y: float) -> float:
        span = self.y1 - self.y0 or 1.0
        return self.top + self.height - (y - self.y0) / span * self.height


def _frame(series: Sequence[Series], width: int, height: int, margin: tuple[int, int, int, int]):
    pts = [p for s in series for p in s.points() if p is not None]
    if not pts:
        return None, [], []
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    if y1 == y0:
        pad = abs(y0) * 0.1 or 1.0
        y0, y1 = y0 - pad, y1 + pad
    else:
        pad = (y1 - y0) * 0.05
        y0, y1 = y0 - pad, y1 + pad
    xt = [t for t in nice_ticks(x0, x1) if x0 <= t <= x1]
    yt = [t for t in nice_ticks(y0, y1) if y0 <= t <= y1]
    top, right, bottom, left = margin
    frame = _Frame(x0, x1, y0, y1, left, top, width - left - right, height - top - bottom)
    return frame, xt, yt


def _label_width(label: str) -> float:
    return 23 + 6.2 * len(label) + 14  # swatch, text at ~6.2 px a character at 11 px, gap


def _legend_positions(series: Sequence[Series], left: float, right: float) -> list[tuple[float, float]]:
    """Legend entries in rows under the title: [(x, y)] of each swatch (unscaled pixels)."""
    out, x, y = [], left, 36.0
    for s in series:
        w = _label_width(s.label)
        if x > left and x + w > right:
            x, y = left, y + 15
        out.append((x, y))
        x += w
    return out


def _top_margin(series: Sequence[Series], width: float, left: float) -> int:
    rows = 1
    if series:
        rows = len({y for _, y in _legend_positions(series, left, width - 16)})
    return 34 + 15 * rows + 4


def _segments(frame: _Frame, s: Series) -> list[list[tuple[float, float]]]:
    segs: list[list[tuple[float, float]]] = [[]]
    for p in s.points():
        if p is None:
            if segs[-1]:
                segs.append([])
            continue
        segs[-1].append((frame.px(p[0]), frame.py(p[1])))
    return [seg for seg in segs if seg]


def line_chart_svg(title: str, series: Sequence[Series], *, width: int = 520, height: int = 300,
                   x_label: str = "step") -> str:
    """A self-contained inline ``<svg>`` line chart (no script, no external resource)."""
    esc = html.escape
    margin = (_top_margin(series, width, 64), 16, 44, 64)
    frame, xt, yt = _frame(series, width, height, margin)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">',
             f'<rect width="{width}" height="{height}" fill="#fff"/>',
             f'<text x="{width / 2:.1f}" y="20" text-anchor="middle" font-size="14" font-weight="bold">{esc(title)}</text>']
    if frame is None:
        parts.append(f'<text x="{width / 2:.1f}" y="{height / 2:.1f}" text-anchor="middle" font-size="12" '
                     f'fill="#888">no values</text></svg>')
        return "".join(parts)
    left, t, w, h = frame.left, frame.top, frame.width, frame.height
    for v in yt:
        y = frame.py(v)
        parts.append(f'<line x1="{left:.1f}" y1="{y:.1f}" x2="{left + w:.1f}" y2="{y:.1f}" stroke="#e5e5e5"/>')
        parts.append(f'<text x="{left - 6:.1f}" y="{y + 4:.1f}" text-anchor="end" font-size="11" fill="#444">{esc(format_tick(v))}</text>')
    for v in xt:
        x = frame.px(v)
        parts.append(f'<line x1="{x:.1f}" y1="{t + h:.1f}" x2="{x:.1f}" y2="{t + h + 4:.1f}" stroke="#444"/>')
        parts.append(f'<text x="{x:.1f}" y="{t + h + 17:.1f}" text-anchor="middle" font-size="11" fill="#444">{esc(format_tick(v))}</text>')
    parts.append(f'<rect x="{left:.1f}" y="{t:.1f}" width="{w:.1f}" height="{h:.1f}" fill="none" stroke="#888"/>')
    parts.append(f'<text x="{left + w / 2:.1f}" y="{height - 8}" text-anchor="middle" font-size="11" fill="#444">{esc(x_label)}</text>')
    for s in series:
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        for seg in _segments(frame, s):
            if len(seg) == 1:
                x, y = seg[0]
                parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{s.color}"/>')
                continue
            pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in seg)
            parts.append(f'<polyline class="series" points="{pts}" fill="none" stroke="{s.color}" stroke-width="2"{dash}>'
                         f'<title>{esc(s.label)}</title></polyline>')
        for p in s.points():
            if p is not None:
                parts.append(f'<circle cx="{frame.px(p[0]):.1f}" cy="{frame.py(p[1]):.1f}" r="2" fill="{s.color}">'
                             f'<title>{esc(s.label)} @ {esc(format_tick(p[0]))}: {p[1]:.6g}</title></circle>')
    for s, (lx, y) in zip(series, _legend_positions(series, left, width - margin[1])):
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        parts.append(f'<line x1="{lx:.1f}" y1="{y:.1f}" x2="{lx + 18:.1f}" y2="{y:.1f}" stroke="{s.color}" stroke-width="2"{dash}/>')
        parts.append(f'<text class="legend" x="{lx + 23:.1f}" y="{y + 4:.1f}" font-size="11">{esc(s.label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _hex(color: str) -> tuple[int, int, int]:
    color = color.lstrip("#")
    return tuple(int(color[i:i + 2], 16) for i in (0, 2, 4))  # type: ignore[return-value]


def line_chart_png(title: str, series: Sequence[Series], path: str | Path, *, width: int = 640,
                   height: int = 360, x_label: str = "step") -> Path:
    """Draws the chart with Pillow and writes it atomically as PNG."""
    from PIL import Image, ImageDraw, ImageFont

    from tpuestimator.system.io import atomic_write_bytes

    scale = 2  # draw at 2x for smooth lines, then downsample
    W, H = width * scale, height * scale
    img = Image.new("RGB", (W, H), "white")
    draw = ImageDraw.Draw(img)

    def font(size: int):
        try:
            return ImageFont.load_default(size=size * scale)
        except TypeError:  # Pillow < 10.1
            return ImageFont.load_default()

    f_title, f_small = font(14), font(11)
    margin = tuple(m * scale for m in (_top_margin(series, width, 70), 16, 44, 70))
    draw.text((W / 2, 10 * scale), title, fill="black", font=f_title, anchor="mt")
    frame, xt, yt = _frame(series, W, H, margin)  # type: ignore[arg-type]
    if frame is None:
        draw.text((W / 2, H / 2), "no values", fill="#888888", font=f_small, anchor="mm")
    else:
        left, t, w, h = frame.left, frame.top, frame.width, frame.height
        for v in yt:
            y = frame.py(v)
            draw.line([(left, y), (left + w, y)], fill="#e5e5e5", width=scale)
            draw.text((left - 6 * scale, y), format_tick(v), fill="#444444", font=f_small, anchor="rm")
        for v in xt:
            x = frame.px(v)
            draw.line([(x, t + h), (x, t + h + 4 * scale)], fill="#444444", width=scale)
            draw.text((x, t + h + 6 * scale), format_tick(v), fill="#444444", font=f_small, anchor="mt")
        draw.rectangle([left, t, left + w, t + h], outline="#888888", width=scale)
        draw.text((left + w / 2, H - 8 * scale), x_label, fill="#444444", font=f_small, anchor="mb")
        for s in series:
            color = _hex(s.color)
            for seg in _segments(frame, s):
                if s.dashed:
                    _dashed_line(draw, seg, color, 2 * scale, 6 * scale, 4 * scale)
                elif len(seg) > 1:
                    draw.line(seg, fill=color, width=2 * scale, joint="curve")
                for x, y in seg:
                    r = 2 * scale
                    draw.ellipse([x - r, y - r, x + r, y + r], fill=color)
        for s, (x, y) in zip(series, _legend_positions(series, left / scale, width - 16)):
            x, y = x * scale, y * scale
            if s.dashed:
                _dashed_line(draw, [(x, y), (x + 18 * scale, y)], _hex(s.color), 2 * scale, 6 * scale, 4 * scale)
            else:
                draw.line([(x, y), (x + 18 * scale, y)], fill=_hex(s.color), width=2 * scale)
            draw.text((x + 23 * scale, y), s.label, fill="black", font=f_small, anchor="lm")
    img = img.resize((width, height), Image.LANCZOS)
    import io

    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=True)
    path = Path(path)
    atomic_write_bytes(path, buf.getvalue())
    return path


def _dashed_line(draw, seg, color, width, dash, gap) -> None:
    for (xa, ya), (xb, yb) in zip(seg, seg[1:]):
        length = math.hypot(xb - xa, yb - ya)
        if length == 0:
            continue
        pos = 0.0
        while pos < length:
            end = min(pos + dash, length)
            draw.line([(xa + (xb - xa) * pos / length, ya + (yb - ya) * pos / length),
                       (xa + (xb - xa) * end / length, ya + (yb - ya) * end / length)], fill=color, width=width)
            pos += dash + gap


def run_series(arrays: Mapping[str, Sequence[float | None]], *, run_label: str | None = None,
               dashed: bool = False, color_offset: int = 0) -> list[tuple[str, list[Series]]]:
    """Chart series of one run's metric arrays, grouped per metric (see `metric_groups`)."""
    charts = []
    for base, members in metric_groups(arrays):
        series = []
        for i, (name, (xs, ys)) in enumerate(members.items()):
            label = name if run_label is None else f"{run_label} {name}"
            series.append(Series(label, xs, ys, PALETTE[(i + color_offset) % len(PALETTE)], dashed))
        charts.append((base, series))
    return charts


def _safe_file_name(name: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_." else "_" for c in name).strip("._")
    return keep or "metric"


def write_metric_pngs(arrays: Mapping[str, Sequence[float | None]], plots_dir: str | Path) -> list[Path]:
    """One PNG per metric (``plots/loss.png`` with loss and val_loss); returns the files written."""
    plots_dir = Path(plots_dir)
    written = []
    for base, series in run_series(arrays):
        written.append(line_chart_png(base, series, plots_dir / f"{_safe_file_name(base)}.png"))
    return written
