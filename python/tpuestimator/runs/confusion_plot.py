"""The confusion matrix as a PNG heat map (Pillow; no matplotlib), for offline evaluation runs.

Rows are the true classes, columns the predicted ones; each cell is shaded by its share of the
row (the recall view: a perfect model is a dark diagonal) and shows its count.
"""
from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np

# white -> dark blue, by the cell's share of its row
_LOW = np.array([247, 251, 255], dtype=np.float64)
_HIGH = np.array([8, 48, 107], dtype=np.float64)


def _font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1: one bitmap size
        return ImageFont.load_default()


def _text_size(draw, text: str, font) -> tuple[float, float]:
    left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
    return right - left, bottom - top


def write_confusion_png(matrix, class_names: Sequence[str], path: str | Path, *, title: str = "Confusion matrix",
                        max_cell: int = 56) -> Path:
    """Draws `matrix` (int [k, k], rows = true class) and writes it atomically as PNG.

    Args:
      matrix: the confusion matrix.
      class_names: the k class names (axis labels; long names are cut to 12 characters).
      path: the PNG to write.
      title: the title line.
      max_cell: the cell size in pixels for few classes (cells shrink to keep the image under
        about 1600 pixels; counts are left out of cells under 22 pixels).

    Returns:
      the path written.
    """
    from PIL import Image, ImageDraw

    from tpuestimator.system.io import atomic_write_bytes

    cm = np.asarray(matrix, dtype=np.int64)
    k = cm.shape[0]
    if cm.shape != (k, k) or len(class_names) != k:
        raise ValueError(f"a square matrix and one name per class, got {cm.shape} and {len(class_names)} names")
    cell = int(max(6, min(max_cell, 1400 // max(k, 1))))
    labels = [str(n)[:12] for n in class_names]
    font, small = _font(14), _font(max(8, min(13, cell // 3)))
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    label_w = int(max(_text_size(probe, t, small)[0] for t in labels)) + 10
    left, top = label_w + 28, 48 + label_w
    width, height = left + k * cell + 20, top + k * cell + 36
    img = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(img)
    draw.text((left, 10), title, fill="black", font=font)
    rows = cm.sum(axis=1, keepdims=True)
    share = np.divide(cm, rows, out=np.zeros(cm.shape), where=rows > 0)
    for i in range(k):
        for j in range(k):
            x0, y0 = left + j * cell, top + i * cell
            color = tuple(int(round(c)) for c in _LOW + (_HIGH - _LOW) * share[i, j])
            draw.rectangle([x0, y0, x0 + cell - 1, y0 + cell - 1], fill=color, outline=(200, 200, 200))
            if cell >= 22:
                text = str(int(cm[i, j]))
                tw, th = _text_size(draw, text, small)
                draw.text((x0 + (cell - tw) / 2, y0 + (cell - th) / 2 - 2), text,
                          fill="white" if share[i, j] > 0.5 else "black", font=small)
    for i, name in enumerate(labels):  # true classes down the left
        tw, th = _text_size(draw, name, small)
        draw.text((left - tw - 6, top + i * cell + (cell - th) / 2 - 2), name, fill="black", font=small)
    for j, name in enumerate(labels):  # predicted classes across the top, written upwards
        tw, th = _text_size(draw, name, small)
        label = Image.new("RGBA", (int(tw) + 4, int(th) + 6), (255, 255, 255, 0))
        ImageDraw.Draw(label).text((2, 0), name, fill="black", font=small)
        rotated = label.rotate(90, expand=True)
        img.paste(rotated, (int(left + j * cell + (cell - rotated.width) / 2), int(top - rotated.height - 6)),
                  rotated)
    draw.text((left, height - 26), "predicted class (columns)  /  true class (rows)", fill=(90, 90, 90), font=small)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    atomic_write_bytes(path, buf.getvalue())
    return Path(path)
