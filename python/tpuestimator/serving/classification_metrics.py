"""Classification metrics computed streaming over batches: accuracy, exact ROC AUC (binary, and
one-vs-rest macro for several classes), log-loss, the confusion matrix and the per-class table
(precision, recall, F1, support).

`StreamingClassificationMetrics.update(labels, probabilities)` per batch, `result()` at the end.
The confusion matrix and the log-loss are accumulated; the AUC needs every score (it is a
ranking metric), so the probabilities are kept: n_examples x n_classes float64, 80 MB per
million examples of 10 classes — fine for evaluation sets. The AUC is the exact Mann-Whitney
statistic with ties counted half, which equals scikit-learn's `roc_auc_score` (trapezoids
under the ROC curve) to rounding. numpy only: no TensorFlow here.
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

import numpy as np

log = logging.getLogger(__name__)

# Probabilities are clipped to [LOG_EPS, 1] before the log, as scikit-learn's log_loss clips
# at the float64 machine epsilon: a confident wrong prediction gives a large, finite loss.
LOG_EPS = float(np.finfo(np.float64).eps)


def roc_auc(scores: np.ndarray, positive: np.ndarray) -> float | None:
    """Exact area under the ROC curve of `scores` for the boolean `positive`: the probability
    that a random positive scores higher than a random negative, ties counting one half.

    Returns:
      the AUC, or None when all examples are positive or all negative (undefined).
    """
    scores = np.asarray(scores, dtype=np.float64).ravel()
    positive = np.asarray(positive, dtype=bool).ravel()
    n_pos = int(positive.sum())
    n_neg = positive.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    order = np.argsort(scores, kind="mergesort")
    sorted_scores = scores[order]
    # average rank (1-based) of each run of tied scores
    starts = np.flatnonzero(np.r_[True, sorted_scores[1:] != sorted_scores[:-1]])
    ends = np.r_[starts[1:], sorted_scores.size]
    avg_rank = (starts + ends + 1) / 2.0
    ranks = np.empty(scores.size, dtype=np.float64)
    ranks[order] = np.repeat(avg_rank, ends - starts)
    rank_sum = float(ranks[positive].sum())
    return (rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClassificationReport:
    """What `StreamingClassificationMetrics.result()` returns.

    Attributes:
      num_examples: examples seen.
      accuracy: top-1 accuracy.
      auc: binary ROC AUC (2 classes: the score of class 1), or the one-vs-rest macro average
        over the classes that occur (and do not make up every example); None if undefined.
      auc_per_class: one-vs-rest AUC of each class (None where undefined).
      log_loss: mean negative log-probability of the true class.
      confusion_matrix: int64 [num_classes, num_classes], rows = true class, columns = predicted.
      per_class: one dict per class: `class_id`, `class`, `precision`, `recall`, `f1`, `support`
        (precision/recall/F1 are 0 where their denominator is 0, as scikit-learn's default).
      class_names: the class names (ids as text when the model names none).
    """

    num_examples: int
    accuracy: float
    auc: float | None
    auc_per_class: list[float | None]
    log_loss: float
    confusion_matrix: np.ndarray
    per_class: list[dict]
    class_names: list[str]

    def scalars(self) -> dict[str, float]:
        """The scalar metrics (for a run's evaluation.json): accuracy, auc, log_loss, macro
        precision/recall/F1, num_examples."""
        out = {"accuracy": self.accuracy, "log_loss": self.log_loss, "num_examples": self.num_examples}
        if self.auc is not None:
            out["auc"] = self.auc
        for key in ("precision", "recall", "f1"):
            out[f"macro_{key}"] = float(np.mean([row[key] for row in self.per_class])) if self.per_class else 0.0
        return out

    def to_dict(self) -> dict:
        """Everything as plain Python values (lists, floats, None)."""
        return {**self.scalars(), "auc": self.auc, "auc_per_class": list(self.auc_per_class),
                "confusion_matrix": self.confusion_matrix.tolist(), "per_class": [dict(r) for r in self.per_class],
                "class_names": list(self.class_names)}


class StreamingClassificationMetrics:
    """Accumulates classification metrics over batches of (labels, probabilities).

    Args:
      num_classes: the number of classes (columns of the probabilities).
      class_names: their names (default the ids as text).
    """

    def __init__(self, num_classes: int, class_names: Sequence[str] | None = None):
        if num_classes < 2:
            raise ValueError(f"num_classes must be >= 2 for classification metrics, got {num_classes}")
        self.num_classes = int(num_classes)
        names = [str(c) for c in class_names] if class_names else []
        self.class_names = names if len(names) == self.num_classes else [str(i) for i in range(self.num_classes)]
        self.confusion = np.zeros((self.num_classes, self.num_classes), dtype=np.int64)
        self._nll_sum = 0.0
        self._labels: list[np.ndarray] = []
        self._scores: list[np.ndarray] = []

    def update(self, labels, probabilities) -> None:
        """Adds one batch.

        Args:
          labels: int [b], class ids from 0.
          probabilities: float [b, num_classes] (or [b] / [b, 1]: the probability of class 1
            of a binary model).

        Raises:
          ValueError: a label outside [0, num_classes), or shapes that do not agree.
        """
        labels = np.asarray(labels).astype(np.int64).ravel()
        probs = np.asarray(probabilities, dtype=np.float64)
        if probs.ndim == 1 or (probs.ndim == 2 and probs.shape[1] == 1 and self.num_classes == 2):
            p1 = probs.reshape(-1)
            probs = np.stack([1.0 - p1, p1], axis=1)
        if probs.ndim != 2 or probs.shape != (labels.size, self.num_classes):
            raise ValueError(f"probabilities of shape {probs.shape} for {labels.size} labels and "
                             f"{self.num_classes} classes: expected ({labels.size}, {self.num_classes})")
        bad = (labels < 0) | (labels >= self.num_classes)
        if bad.any():
            raise ValueError(f"label {int(labels[bad][0])} is outside [0, {self.num_classes}): the export's "
                             "classes do not match the data's labels")
        predicted = np.argmax(probs, axis=1)
        np.add.at(self.confusion, (labels, predicted), 1)
        true_p = probs[np.arange(labels.size), labels]
        self._nll_sum += float(-np.log(np.clip(true_p, LOG_EPS, 1.0)).sum())
        self._labels.append(labels)
        self._scores.append(probs)

    @property
    def num_examples(self) -> int:
        return int(self.confusion.sum())

    def result(self) -> ClassificationReport:
        """The metrics over every batch so far.

        Raises:
          ValueError: no example was added.
        """
        n = self.num_examples
        if n == 0:
            raise ValueError("no examples were evaluated")
        labels = np.concatenate(self._labels)
        scores = np.concatenate(self._scores)
        k = self.num_classes
        per_class_auc = [roc_auc(scores[:, c], labels == c) for c in range(k)]
        if k == 2:
            auc = per_class_auc[1]
        else:
            defined = [a for a in per_class_auc if a is not None]
            if len(defined) < k:
                missing = [self.class_names[c] for c, a in enumerate(per_class_auc) if a is None]
                log.warning("AUC left out for classes %s (no example of the class, or only that class): the "
                            "macro AUC averages the other %d", missing, len(defined))
            auc = float(np.mean(defined)) if defined else None
        cm = self.confusion
        tp = np.diag(cm).astype(np.float64)
        support = cm.sum(axis=1)
        predicted = cm.sum(axis=0)
        precision = np.divide(tp, predicted, out=np.zeros(k), where=predicted > 0)
        recall = np.divide(tp, support, out=np.zeros(k), where=support > 0)
        denom = precision + recall
        f1 = np.divide(2 * precision * recall, denom, out=np.zeros(k), where=denom > 0)
        per_class = [{"class_id": c, "class": self.class_names[c], "precision": float(precision[c]),
                      "recall": float(recall[c]), "f1": float(f1[c]), "support": int(support[c])}
                     for c in range(k)]
        return ClassificationReport(num_examples=n, accuracy=float(tp.sum() / n), auc=auc,
                                    auc_per_class=per_class_auc, log_loss=self._nll_sum / n,
                                    confusion_matrix=cm.copy(), per_class=per_class,
                                    class_names=list(self.class_names))
