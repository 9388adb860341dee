"""Streaming classification metrics (`classification_metrics`) against scikit-learn, and the
confusion-matrix PNG (`runs/confusion_plot`). numpy only: fast."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from sklearn.metrics import (
    confusion_matrix,
    log_loss,
    precision_recall_fscore_support,
    roc_auc_score,
)

from tpuestimator.runs.confusion_plot import write_confusion_png
from tpuestimator.serving.classification_metrics import StreamingClassificationMetrics, roc_auc


def _softmax(logits):
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _stream(labels, probs, k, sizes=(1, 7, 64, 3)):
    m = StreamingClassificationMetrics(k, [f"c{i}" for i in range(k)])
    start, i = 0, 0
    while start < len(labels):   # uneven batches: the result must not depend on them
        size = sizes[i % len(sizes)]
        m.update(labels[start:start + size], probs[start:start + size])
        start, i = start + size, i + 1
    return m.result()


def test_binary_auc_equals_sklearn_with_ties():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 2000)
    p1 = np.round(np.clip(0.3 * y + rng.random(2000) * 0.7, 0, 1), 2)   # rounded: many tied scores
    probs = np.stack([1 - p1, p1], axis=1)
    report = _stream(y, probs, 2)
    assert abs(report.auc - roc_auc_score(y, p1)) <= 1e-6
    assert report.confusion_matrix.sum() == 2000
    # a [b, 1] sigmoid output reads as the probability of class 1
    m = StreamingClassificationMetrics(2)
    m.update(y, p1[:, None])
    assert abs(m.result().auc - roc_auc_score(y, p1)) <= 1e-6


@pytest.mark.filterwarnings("ignore:The y_prob values do not sum to one")
def test_multiclass_ovr_macro_auc_log_loss_confusion_and_per_class_equal_sklearn():
    rng = np.random.default_rng(1)
    k, n = 5, 3001
    y = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k)) + 1.5 * np.eye(k)[y]
    probs = _softmax(logits).astype(np.float32)   # the export returns float32
    report = _stream(y, probs, k)
    assert abs(report.auc - roc_auc_score(y, probs, multi_class="ovr", average="macro")) <= 1e-6
    assert report.log_loss == pytest.approx(log_loss(y, probs.astype(np.float64), labels=list(range(k))), abs=1e-6)
    assert report.accuracy == np.mean(probs.argmax(1) == y)
    np.testing.assert_array_equal(report.confusion_matrix, confusion_matrix(y, probs.argmax(1), labels=range(k)))
    assert report.confusion_matrix.sum() == n == report.num_examples
    precision, recall, f1, support = precision_recall_fscore_support(y, probs.argmax(1), labels=range(k),
                                                                     zero_division=0)
    for c, row in enumerate(report.per_class):
        assert row["class"] == f"c{c}" and row["support"] == support[c]
        assert row["precision"] == pytest.approx(precision[c]) and row["recall"] == pytest.approx(recall[c])
        assert row["f1"] == pytest.approx(f1[c])
    scalars = report.scalars()
    assert scalars["macro_f1"] == pytest.approx(f1.mean()) and set(scalars) >= {"accuracy", "auc", "log_loss"}


def test_undefined_auc_of_an_absent_class_is_left_out_of_the_macro_average():
    y = np.array([0, 1, 0, 1, 0, 1])
    probs = _softmax(np.random.default_rng(2).normal(size=(6, 3)))
    report = _stream(y, probs, 3)
    assert report.auc_per_class[2] is None
    assert report.auc == pytest.approx(np.mean(report.auc_per_class[:2]))
    assert report.per_class[2]["support"] == 0 and report.per_class[2]["recall"] == 0.0
    assert roc_auc(np.array([0.1, 0.2]), np.array([True, True])) is None


def test_bad_updates_are_clear_errors():
    m = StreamingClassificationMetrics(3)
    with pytest.raises(ValueError, match="label 3 is outside"):
        m.update([3], [[0.2, 0.3, 0.5]])
    with pytest.raises(ValueError, match="expected \\(2, 3\\)"):
        m.update([0, 1], [[0.5, 0.5]])
    with pytest.raises(ValueError, match="no examples"):
        m.result()
    with pytest.raises(ValueError, match="num_classes"):
        StreamingClassificationMetrics(1)


def test_confusion_png_is_written_atomically_and_readable(tmp_path):
    cm = np.array([[30, 2, 0], [5, 20, 1], [0, 0, 12]])
    path = write_confusion_png(cm, ["circle", "square", "a very long class name"], tmp_path / "cm.png")
    with Image.open(path) as img:
        img.load()
        assert img.format == "PNG" and img.width > 3 * 40 and img.height > 3 * 40
        # the diagonal cell of the best-recalled row is darker than an empty cell
        assert sum(img.getpixel((img.width - 40, img.height - 70))) < sum(img.getpixel((img.width - 40, 120)))
    assert [p.name for p in tmp_path.iterdir()] == ["cm.png"]   # no temporary file left
    with pytest.raises(ValueError, match="square matrix"):
        write_confusion_png(cm, ["a", "b"], tmp_path / "bad.png")
    big = np.random.default_rng(0).integers(0, 50, size=(100, 100))   # many classes: cells shrink, no text
    with Image.open(write_confusion_png(big, [str(i) for i in range(100)], tmp_path / "big.png")) as img:
        assert img.width <= 1700
