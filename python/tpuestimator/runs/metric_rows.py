"""`MetricRows`: the rows of a run's ``metrics.json``, a training curve of bounded size.

One row per training loop (the loop's ``loss`` and reported metrics, e.g. ``accuracy``); an
evaluation adds ``val_<name>`` values to the row of the loop it followed (null in the other
rows), so tfruns's History panel draws a training curve with the evaluations on it, as it does
for a keras run's epochs (docs/RUN_FORMAT.md, "Metric rows").

Bounded: at most `MAX_TRAIN_ROWS` rows that hold training values only. When a run has more
loops than that, the stride between two kept training rows doubles (1, 2, 4, ... loops) and the
rows off the new stride are dropped; a row with evaluation values is never dropped, nor the
last row. The rows kept therefore depend only on how many loops ran and which of them were
followed by an evaluation, so `planned_row_count()` gives, before a run starts, the number of
rows it will have when it finishes (tfruns's ``epochs``, counted against the non-null values
of the last metrics.json key: rule 12).

TensorFlow-free.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from tpuestimator.runs.values import EVAL_PREFIX, X_KEY

# Rows holding training values only that one run keeps (evaluation rows come on top).
MAX_TRAIN_ROWS = 200


def _kept(index: int, stride: int, last: int, eval_loops: set[int]) -> bool:
    return index % stride == 0 or index == last or index in eval_loops


def planned_row_count(loops: int, eval_loops: Iterable[int] = (), *, max_train_rows: int = MAX_TRAIN_ROWS) -> int:
    """The rows a run of `loops` training loops writes, when the loops numbered `eval_loops`
    (1-based) are followed by an evaluation: what `MetricRows` keeps at the end."""
    evals = {i for i in eval_loops if 1 <= i <= loops}
    if loops <= 0:
        return len(evals)
    stride = 1
    while True:
        # as MetricRows counts them: the training-only rows before the last one
        train_only = (loops - 1) // stride - sum(1 for i in evals if i % stride == 0 and i < loops)
        if train_only <= max_train_rows or stride >= loops:
            break
        stride *= 2
    off_stride = {i for i in evals | {loops} if i % stride != 0}
    return loops // stride + len(off_stride)


def planned_steps(steps: list[float | None], max_steps: int | None, count: int) -> list[int | None]:
    """The x values of the `count` rows not recorded yet: evenly spaced global steps from the
    last recorded one (in `steps`) up to ``train.max_steps`` (null when that is unknown).

    tfruns's chart (inst/views/components/metrics_charts.html, MetricsCharts) sets the x axis
    maximum to the LAST ``epoch`` value and uses the ``epoch`` values as tick values, so a
    null there would be handed to c3 as an axis bound and as ticks. keras never writes one
    (without an ``epoch`` key tfruns uses 1..n, padding rows included), so neither do we:
    the axis of a running or stopped run spans the planned steps, as keras's spans the
    planned epochs. The metric values of those rows stay null."""
    if count <= 0:
        return []
    last = next((s for s in reversed(steps) if s is not None), 0) or 0
    if not max_steps or max_steps <= last:
        return [None] * count
    span = max_steps - last
    return [int(round(last + span * k / count)) for k in range(1, count + 1)]


class MetricRows:
    """The rows of one run's metrics.json (not thread-safe: the recorder holds its lock)."""

    def __init__(self, *, max_train_rows: int = MAX_TRAIN_ROWS):
        self.max_train_rows = max_train_rows
        self.stride = 1
        self._loops = 0  # training loops seen (the 1-based index of the last one)
        self._index: list[int] = []  # loop index of each row
        self._steps: list[float | None] = []
        self._rows: list[dict[str, float | None]] = []
        self._names: list[str] = []

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def steps(self) -> list[float | None]:
        return list(self._steps)

    @property
    def rows(self) -> list[dict[str, float | None]]:
        return [dict(r) for r in self._rows]

    def add(self, step: float | None, values: Mapping[str, float | None], *, new_loop: bool) -> None:
        """Records `values` (training names, and ``val_`` names for an evaluation) at `step`.

        `new_loop`: the values are a training loop's, so they start a new row. Otherwise
        (an evaluation) they join the row at the same step, or start one when there is none."""
        for key in values:
            if key not in self._names:
                self._names.append(key)
        if not new_loop and self._rows and step is not None and self._steps[-1] == step:
            self._rows[-1].update(values)
            return
        self._loops += 1
        self._index.append(self._loops)
        self._steps.append(step)
        self._rows.append(dict(values))
        self._thin()

    def _has_eval(self, row: Mapping[str, float | None]) -> bool:
        return any(k.startswith(EVAL_PREFIX) for k in row)

    def _thin(self) -> None:
        # The row before the one just added goes once it is off the stride (it was kept as the
        # last row); the row just added is not counted: an evaluation may still join it.
        if len(self._rows) >= 2:
            i, r = self._index[-2], self._rows[-2]
            if i % self.stride != 0 and not self._has_eval(r):
                for seq in (self._index, self._steps, self._rows):
                    del seq[-2]
        while self._train_only_before_last() > self.max_train_rows and self.stride < self._loops:
            self.stride *= 2
            last = self._index[-1]
            keep = [k for k, (i, r) in enumerate(zip(self._index, self._rows))
                    if _kept(i, self.stride, last, set()) or self._has_eval(r)]
            self._index = [self._index[k] for k in keep]
            self._steps = [self._steps[k] for k in keep]
            self._rows = [self._rows[k] for k in keep]

    def _train_only_before_last(self) -> int:
        return sum(1 for r in self._rows[:-1] if not self._has_eval(r))

    def arrays(self, *, pad: int = 0, pad_x: list | None = None) -> dict[str, list]:
        """The metrics.json arrays: ``epoch`` (the global steps), the ``val_`` arrays, then the
        training arrays, the one with the most values last; `pad` null rows at the end (with
        `pad_x` as their ``epoch`` values)."""
        x = [_int_if_whole(s) for s in self._steps] + list(pad_x if pad_x is not None else [None] * pad)
        arrays: dict[str, list] = {X_KEY: x}
        train = [n for n in self._names if not n.startswith(EVAL_PREFIX)]
        val = [n for n in self._names if n.startswith(EVAL_PREFIX)]
        # tfruns draws val_<m> only beside a <m> array (rule 7): an evaluation-only metric gets
        # an all-null training array so its curve is still charted.
        train += [n[len(EVAL_PREFIX):] for n in val if n[len(EVAL_PREFIX):] not in train]
        # tfruns counts the completed rows on the LAST array but 'epoch' (R/ls_runs.R,
        # run_record(); rule 12): the array with the most values (a training one, which has a
        # value in every row) goes last.
        names = val + train
        if names:
            counts = {n: sum(row.get(n) is not None for row in self._rows) for n in names}
            best = max(names, key=lambda n: (counts[n], not n.startswith(EVAL_PREFIX)))  # ties: the first
            names = [n for n in names if n != best] + [best]
        tail = [None] * pad
        for name in names:
            arrays[name] = [row.get(name) for row in self._rows] + tail
        return arrays


def _int_if_whole(value: float | None) -> float | int | None:
    if value is not None and float(value).is_integer():
        return int(value)
    return value
