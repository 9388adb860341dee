"""Offline evaluation of a regressor: streaming MAE, RMSE, R² (exact: sums of the errors and of
the labels kept in float64) and a residual plot (predicted vs residual, a PNG drawn with
Pillow), for `tpuestimator evaluate EXPORT` on a regression export. numpy + Pillow only.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

# residuals kept for the plot (a uniform reservoir over all examples)
PLOT_POINTS = 5000


@dataclasses.dataclass(frozen=True)
class RegressionReport:
    num_examples: int
    mae: float
    rmse: float
    r2: float
    mean_label: float

    def scalars(self) -> dict[str, float]:
        return {"mae": self.mae, "rmse": self.rmse, "r2": self.r2, "num_examples": self.num_examples}

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class StreamingRegressionMetrics:
    """`update(labels, predictions)` batch by batch; `result()` -> `RegressionReport`."""

    def __init__(self, seed: int = 0):
        self.n = 0
        self.abs_sum = 0.0
        self.sq_sum = 0.0
        self.label_sum = 0.0
        self.label_sq_sum = 0.0
        self.points = np.zeros((0, 2))
        self.rng = np.random.default_rng(seed)

    def update(self, labels, predictions) -> None:
        y = np.asarray(labels, np.float64).reshape(-1)
        p = np.asarray(predictions, np.float64).reshape(-1)
        e = y - p
        self.n += len(y)
        self.abs_sum += float(np.abs(e).sum())
        self.sq_sum += float((e * e).sum())
        self.label_sum += float(y.sum())
        self.label_sq_sum += float((y * y).sum())
        points = np.stack([p, e], axis=1)
        self.points = np.concatenate([self.points, points])
        if len(self.points) > PLOT_POINTS:
            self.points = self.points[self.rng.choice(len(self.points), PLOT_POINTS, replace=False)]

    def result(self) -> RegressionReport:
        n = max(self.n, 1)
        mean = self.label_sum / n
        total = self.label_sq_sum - n * mean * mean
        r2 = 1.0 - self.sq_sum / total if total > 0 else float("nan")
        return RegressionReport(num_examples=self.n, mae=self.abs_sum / n, rmse=float(np.sqrt(self.sq_sum / n)),
                                r2=float(r2), mean_label=float(mean))


def write_residual_png(points: np.ndarray, path: str | Path, *, size: int = 480) -> None:
    """Residual (label - prediction, vertical) against the prediction (horizontal), a zero line."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (size, size), "white")
    draw = ImageDraw.Draw(image)
    margin = 40
    inner = size - 2 * margin
    draw.rectangle([margin, margin, size - margin, size - margin], outline=(120, 120, 120))
    if len(points):
        x, y = points[:, 0], points[:, 1]
        x_lo, x_hi = float(x.min()), float(x.max())
        y_max = float(np.abs(y).max()) or 1.0
        x_span = (x_hi - x_lo) or 1.0

        def at(px, py):
            return margin + (px - x_lo) / x_span * inner, margin + (1 - (py + y_max) / (2 * y_max)) * inner

        zero = at(x_lo, 0.0)[1]
        draw.line([margin, zero, size - margin, zero], fill=(200, 40, 40))
        for px, py in points:
            cx, cy = at(px, py)
            draw.ellipse([cx - 2, cy - 2, cx + 2, cy + 2], fill=(8, 48, 107))
        draw.text((margin, size - margin + 8), f"prediction {x_lo:.3g} .. {x_hi:.3g}", fill="black")
        draw.text((margin, 12), f"residual (label - prediction), |max| {y_max:.3g}", fill="black")
    image.save(path, format="PNG")
