"""The SFT iterator: whole conversations per row, assistant-only loss, exact resume, one-line errors."""

import numpy as np
import pytest

from apertus_jax.posttrain.sft_data import ChatPipeline, load_conversations


def _pipeline(paths, tokenizer, seq_len=128, rows=4, index=0, count=1):
    return ChatPipeline(
        paths, tokenizer, seq_len=seq_len, batch_size=rows, process_index=index, process_count=count, seed=3
    )


def test_rows_hold_whole_conversations_with_assistant_only_loss(chat_path, tokenizer):
    conversations = load_conversations([chat_path], tokenizer, 128)
    expected = sorted(ids[trained].tolist() for ids, trained in conversations)
    pipeline = _pipeline([chat_path], tokenizer, rows=1)
    seen = []
    while pipeline.epoch == 0:  # one row per batch: stops right after the epoch's last row
        batch = next(pipeline)
        assert batch["tokens"].shape == (1, 128) and batch["tokens"].dtype == np.int32
        for row in range(1):
            for segment in range(1, batch["segment_ids"][row].max() + 1):
                span = batch["segment_ids"][row] == segment
                assert batch["tokens"][row][span][0] == tokenizer.bod_id  # starts at its beginning
                assert batch["positions"][row][span].tolist() == list(range(span.sum()))
                seen.append(batch["targets"][row][span & (batch["loss_mask"][row] == 1)].tolist())
    # One epoch trains every conversation's assistant tokens exactly once, several conversations per row.
    assert sorted(seen) == expected
    assert pipeline.step < len(expected)


def test_restored_iterator_continues_bitwise(chat_path, tokenizer):
    reference = _pipeline([chat_path], tokenizer)
    batches = [next(reference) for _ in range(9)]
    resumed = _pipeline([chat_path], tokenizer)
    for _ in range(4):
        next(resumed)
    state = resumed.get_state()
    fresh = _pipeline([chat_path], tokenizer)
    fresh.set_state(state)
    for expected in batches[4:]:
        got = next(fresh)
        for key in expected:
            np.testing.assert_array_equal(got[key], expected[key])
    with pytest.raises(ValueError, match="other conversations"):
        _pipeline([chat_path], tokenizer, seq_len=120).set_state(state)
    # The target tokens handed out (padding excluded) are counted across the restore.
    expected = sum(int(np.count_nonzero(b["segment_ids"])) for b in batches)
    assert (
        fresh.consumed() == {"tokens": {"posttrain": expected}} and reference.consumed() == fresh.consumed()
    )
    assert 0 < expected < sum(b["segment_ids"].size for b in batches)


def test_shards_split_the_conversations(chat_path, tokenizer):
    shards = [_pipeline([chat_path], tokenizer, rows=4, index=i, count=2) for i in range(2)]
    assert len(shards[0].conversations) + len(shards[1].conversations) == 18


def test_overlong_conversation_names_its_line(write_jsonl, tokenizer):
    short = {
        "messages": [{"role": "user", "content": "Hallo"}, {"role": "assistant", "content": "Guten Tag."}]
    }
    long = {
        "messages": [
            {"role": "user", "content": "Hallo"},
            {"role": "assistant", "content": " ".join(map(str, range(100)))},
        ]
    }
    path = write_jsonl([short, long])
    with pytest.raises(ValueError, match=f"^{path}:2: conversation of \\d+ tokens exceeds a row"):
        _pipeline([path], tokenizer)
