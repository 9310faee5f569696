"""The `eval` section: range checks, the task and held-out path formats, when an eval is due."""

import pytest

from apertus_jax.eval.config import EvalConfig


def test_eval_section_is_checked():
    with pytest.raises(ValueError, match="eval.tasks"):
        EvalConfig(tasks=("hellaswag",))
    with pytest.raises(ValueError, match="component=path"):
        EvalConfig(heldout_paths=("web",))
    assert EvalConfig(every_steps=4).due(12, 14) and EvalConfig(every_steps=4).due(14, 14)
    assert not EvalConfig(every_steps=4).due(13, 14) and not EvalConfig().due(14, 14)
