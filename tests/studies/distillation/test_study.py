"""The distillation study: both arms (distilled and from scratch) start from the same parameters and batch for
every seed, and the results and plot are written."""

import dataclasses
import json

import pytest

from apertus_jax.studies.distillation import study

K = 8


@pytest.mark.slow
def test_the_study_trains_both_arms_from_the_same_start_for_every_seed(teacher_logits_store, tmp_path):
    teacher, student, _ = teacher_logits_store
    config = dataclasses.replace(student, eval=dataclasses.replace(student.eval, every_steps=3, tasks=()))
    results = study.run_study(teacher, config, str(tmp_path), seeds=(0, 1), k=K, alpha=0.9)
    for arm in study.ARMS:
        assert [len(ce) for ce in results[arm]["ce"]] == [3, 3]
        assert results[arm]["held_out_loss"] and all(
            len(v) == 2 for v in results[arm]["held_out_loss"].values()
        )
    # The same parameters and batch: step 1's cross-entropy is the same in both arms; then the teacher differs.
    for seed in range(2):
        assert results["distilled"]["ce"][seed][0] == results["scratch"]["ce"][seed][0]
        assert results["distilled"]["ce"][seed][-1] != results["scratch"]["ce"][seed][-1]
    assert results["distilled"]["ce"][0][0] != results["distilled"]["ce"][1][0]  # the seeds differ
    assert (tmp_path / study.PLOT).stat().st_size > 0
    assert json.loads((tmp_path / study.RESULTS).read_text())["seeds"] == [0, 1]
