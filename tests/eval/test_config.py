"""The `eval` section: range checks, the task and held-out path formats, when an eval is due."""

import pytest

from apertus_jax.eval.config import EvalConfig
from apertus_jax.eval.in_loop import InLoopEvaluation
from apertus_jax.train.hooks import due


def test_eval_section_is_checked():
    with pytest.raises(ValueError, match="eval.tasks"):
        EvalConfig(tasks=("hellaswag",))
    with pytest.raises(ValueError, match="component=path"):
        EvalConfig(heldout_paths=("web",))
    every_4, never = (InLoopEvaluation(EvalConfig(every_steps=n), None) for n in (4, 0))
    assert due(every_4, 12, 14) and due(every_4, 14, 14)  # every 4th step and the last
    assert not due(every_4, 13, 14) and not due(never, 14, 14)
