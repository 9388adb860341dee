"""controller.EvalCadence: when train_and_evaluate evaluates (TensorFlow-free)."""
from __future__ import annotations

import pytest

from tpuestimator.core.controller import EvalCadence


@pytest.mark.quick("core")
def test_segments_end_at_each_evaluation_step_capped_at_max_steps():
    cadence = EvalCadence(every_n_steps=20, max_steps=50)
    assert [cadence.segment_end(s) for s in (0, 19, 20, 40, 45)] == [20, 20, 40, 50, 50]
    assert EvalCadence(every_n_steps=20, max_steps=None).segment_end(25) == 40
    assert EvalCadence(every_n_steps=None, max_steps=50).segment_end(10) == 50
    assert EvalCadence(every_n_steps=None, max_steps=None).segment_end(10) is None


def test_evaluations_are_due_at_multiples_at_max_steps_and_when_stopped():
    cadence = EvalCadence(every_n_steps=20, max_steps=50)
    assert cadence.eval_due(20, stop_requested=False) and cadence.eval_due(50, stop_requested=False)
    assert not cadence.eval_due(30, stop_requested=False)  # the input ended inside a segment
    assert cadence.eval_due(30, stop_requested=True)
    only_at_end = EvalCadence(every_n_steps=None, max_steps=50)
    assert not only_at_end.eval_due(40, stop_requested=False) and only_at_end.eval_due(50, stop_requested=False)


def test_a_final_evaluation_unless_the_last_one_was_at_the_final_step():
    assert EvalCadence.final_eval_due(50, None)
    assert EvalCadence.final_eval_due(50, 40)
    assert not EvalCadence.final_eval_due(50, 50)
