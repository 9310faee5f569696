"""Continuation scoring: equals a direct log-softmax, the chain rule, and packing/batching never change it."""

import numpy as np
import pytest

from apertus_jax.eval.scoring import continuation_logprobs, pack_requests

TEXT = (
    "Alle Menschen sind frei und gleich an Würde und Rechten geboren. Sie sind mit Vernunft und Gewissen "
    "begabt und sollen einander im Geist der Brüderlichkeit begegnen."
)
SEQ_LEN = 48  # one row length for every test: each (batch, length) shape compiles once


@pytest.fixture(scope="module")
def ids(tokenizer):
    return tokenizer.encode(TEXT)


def _direct(forward, context, continuation):
    """log p(continuation | context) from one unpacked forward and a float64 numpy log-softmax."""
    seq = np.asarray([*context, *continuation], np.int32)[None]
    logits = forward(seq, np.arange(seq.shape[1], dtype=np.int32)[None], np.ones_like(seq))
    logprobs = (
        logits
        - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True))
        - logits.max(-1, keepdims=True)
    )
    n = len(context)
    return np.asarray([logprobs[0, n - 1 + j, t] for j, t in enumerate(continuation)])


@pytest.mark.slow
def test_matches_direct_log_softmax(forward, token_logprobs, tokenizer, ids):
    context, continuation = [tokenizer.bod_id, *ids[:10]], ids[10:17]
    [got] = continuation_logprobs(
        token_logprobs, [(context, continuation)], seq_len=SEQ_LEN, batch_size=1, pad_id=tokenizer.pad_id
    )
    expected = _direct(forward, context, continuation)
    assert got.shape == (7,)
    np.testing.assert_allclose(got, expected, atol=1e-4)
    assert np.all(got < 0) and np.ptp(got) > 0.1  # real, varying log-probabilities


@pytest.mark.slow
def test_chain_rule_full_continuation_is_sum_of_parts(token_logprobs, tokenizer, ids):
    context, a, b = [tokenizer.bod_id, *ids[:5]], ids[5:9], ids[9:15]
    whole, first, second = continuation_logprobs(
        token_logprobs,
        [(context, [*a, *b]), (context, a), ([*context, *a], b)],
        seq_len=SEQ_LEN,
        batch_size=4,
        pad_id=tokenizer.pad_id,
    )
    np.testing.assert_allclose(whole, np.concatenate([first, second]), atol=1e-5)
    np.testing.assert_allclose(whole.sum(), first.sum() + second.sum(), atol=1e-4)


def test_packing_and_batching_do_not_change_scores(token_logprobs, tokenizer, ids):
    rng = np.random.default_rng(0)
    requests = []
    for _ in range(11):
        start, n_ctx, n_cont = rng.integers(0, 10), rng.integers(1, 12), rng.integers(1, 6)
        requests.append(
            ([tokenizer.bod_id, *ids[start : start + n_ctx]], ids[start + n_ctx : start + n_ctx + n_cont])
        )
    alone = [
        continuation_logprobs(token_logprobs, [r], seq_len=SEQ_LEN, batch_size=1, pad_id=tokenizer.pad_id)[0]
        for r in requests
    ]
    rows, _ = pack_requests(requests, SEQ_LEN, tokenizer.pad_id)
    assert len(rows["tokens"]) < len(requests)  # several requests do share a row
    for batch_size in (1, 4):  # 4 rows per batch: the last batch holds padding rows
        packed = continuation_logprobs(
            token_logprobs, requests, seq_len=SEQ_LEN, batch_size=batch_size, pad_id=tokenizer.pad_id
        )
        for got, expected in zip(packed, alone):
            np.testing.assert_allclose(got, expected, atol=2e-5)


def test_pack_layout_segments_and_left_truncation():
    requests = [([1, 10, 11, 12, 13, 14], [20, 21]), ([1, 30], [40]), ([1, 50, 51], [60, 61, 62])]
    rows, spans = pack_requests(requests, 6, pad_id=3)
    tokens, segments, positions = rows["tokens"], rows["segment_ids"], rows["positions"]
    # Request 0 (8 tokens) keeps its last 4 context tokens; longest first: row 0 holds it alone.
    np.testing.assert_array_equal(tokens[0], [11, 12, 13, 14, 20, 21])
    np.testing.assert_array_equal(positions[0], np.arange(6))
    assert spans[0] == (0, 3, 5)
    # Requests 2 (6 tokens) and 1 (3 tokens) go to fresh rows; segments restart positions at 0.
    assert tokens.shape == (3, 6)
    for i, (row, start, stop) in enumerate(spans):
        np.testing.assert_array_equal(tokens[row, start + 1 : stop + 1], requests[i][1])
        assert len(set(segments[row, start : stop + 1])) == 1 and segments[row, start] > 0
    assert np.all((tokens == 3) == (segments == 0))


@pytest.mark.parametrize(
    "request_, message",
    [
        (([1, 2], []), "empty continuation"),
        (([], [5]), "empty context"),
        (([1], list(range(8))), "does not fit"),
    ],
)
def test_bad_requests_raise(request_, message):
    with pytest.raises(ValueError, match=message):
        pack_requests([request_], 8, pad_id=3)


def test_batch_size_must_be_positive(token_logprobs):
    with pytest.raises(ValueError, match="batch_size=0"):
        continuation_logprobs(token_logprobs, [([1, 5], [6])], seq_len=SEQ_LEN, batch_size=0, pad_id=3)
