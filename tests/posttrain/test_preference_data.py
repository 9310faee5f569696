"""Preference rows: QRPO examples, DPO pairs (counted skips), exact resume, over-long rows named."""

import numpy as np
import pytest

from apertus_jax.posttrain import reference as reference_lib
from apertus_jax.posttrain.preference_data import PreferencePipeline, completion_examples, training_rows


def _pipeline(paths, tokenizer, mode, seq_len=128):
    return PreferencePipeline(
        paths,
        tokenizer,
        mode=mode,
        seq_len=seq_len,
        batch_size=4,
        process_index=0,
        process_count=1,
        seed=2,
        make_reference=lambda examples: reference_lib.cached_reference(
            -np.arange(len(examples), dtype=np.float32)
        ),
    )


def test_examples_and_pairs_of_the_tiny_set(preference_path, tokenizer):
    examples = completion_examples([preference_path], tokenizer)
    assert len(examples) == 36
    first = examples[:3]
    assert [e["reward"] for e in first] == [1.0, pytest.approx(0.5333333), 0.0]
    # references 0.53, 0.24, 0.71, 0.0: 0.53 >= {0.53, 0.24, 0.0} (ties count), 0.0 >= {0.0}
    assert [e["quantile_reward"] for e in first] == [1.0, 0.75, 0.25]
    pairs, skipped = training_rows(examples, "dpo", 128)
    assert skipped == 0 and pairs[0] == (0, 2) and len(pairs) == 12
    assert training_rows(examples, "qrpo", 128)[0] == [(k,) for k in range(36)]


def test_dpo_skips_records_without_a_reward_difference(write_jsonl, tokenizer):
    tie = {"prompt": "Frage", "completions": [{"text": "a", "reward": 0.5}] * 2, "reference_rewards": [0.1]}
    good = {
        "prompt": "Frage",
        "completions": [{"text": "a", "reward": 0.9}, {"text": "b", "reward": 0.1}],
        "reference_rewards": [0.1],
    }
    pipeline = _pipeline([write_jsonl([tie, good])], tokenizer, "dpo")
    assert pipeline.skipped == 1 and pipeline.groups == [(2, 3)]
    batch = next(pipeline)
    np.testing.assert_array_equal(batch["ref_logprobs"], [[-2.0, -3.0]] * 4)
    np.testing.assert_array_equal(batch["quantile_reward"], [[1.0, 1.0]] * 4)


def test_restored_iterator_continues_bitwise(preference_path, tokenizer):
    reference = _pipeline([preference_path], tokenizer, "qrpo")
    expected = [next(reference) for _ in range(12)][5:]
    resumed = _pipeline([preference_path], tokenizer, "qrpo")
    for _ in range(5):
        next(resumed)
    fresh = _pipeline([preference_path], tokenizer, "qrpo")
    fresh.set_state(resumed.get_state())
    for batch in expected:
        got = next(fresh)
        for key in batch:
            np.testing.assert_array_equal(got[key], batch[key])
    with pytest.raises(ValueError, match="other records"):
        _pipeline([preference_path], tokenizer, "dpo").set_state(resumed.get_state())


def test_overlong_row_names_its_line(write_jsonl, tokenizer):
    long = {
        "prompt": "Frage",
        "completions": [{"text": " ".join(map(str, range(80))), "reward": 1}],
        "reference_rewards": [0],
    }
    path = write_jsonl([long])
    with pytest.raises(
        ValueError, match=f"^{path}:1: a qrpo row of \\d+ positions exceeds data.seq_len = 128"
    ):
        _pipeline([path], tokenizer, "qrpo")
