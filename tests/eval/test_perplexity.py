"""Perplexity: a uniform model gives the vocabulary size, packing equals per-document scoring, EoD masking."""

import math

import numpy as np
import pytest

from apertus_jax.data import demo_corpus
from apertus_jax.eval.perplexity import packed_rows, perplexity


@pytest.fixture(scope="module")
def documents(tokenizer):
    """Six short real held-out German documents (first 200 characters), as `<s> ... </s>`."""
    texts = [
        d["text"][:200] for d in demo_corpus.load_demo_documents("heldout", sources=["german_prose"])[:6]
    ]
    return texts, [tokenizer.encode_document(t) for t in texts]


def test_uniform_model_has_perplexity_equal_to_vocab_size(documents, tokenizer):
    texts, docs = documents
    vocab = 1024

    def uniform(tokens, positions, segment_ids):
        return np.full((tokens.shape[0], tokens.shape[1] - 1), -math.log(vocab), np.float32)

    num_bytes = sum(len(t.encode("utf-8")) for t in texts)
    result = perplexity(
        uniform,
        docs,
        seq_len=32,
        batch_size=4,
        eod_id=tokenizer.eod_id,
        pad_id=tokenizer.pad_id,
        num_bytes=num_bytes,
    )
    # Every token after its document's BoD is scored once: text tokens and the EoD, never "EoD -> BoD".
    assert result.num_tokens == sum(len(d) - 1 for d in docs)
    assert result.perplexity == pytest.approx(vocab, rel=1e-5)
    assert result.bits_per_byte == pytest.approx(
        result.num_tokens * 10 / num_bytes, rel=1e-5
    )  # log2(1024) = 10


@pytest.mark.slow
def test_packed_perplexity_equals_per_document_forwards(forward, token_logprobs, documents, tokenizer):
    """With one row long enough for all documents (none is split), packing them into that row (EoD masking,
    positions restarting) gives exactly the per-document log-likelihoods."""
    docs = [tokenizer.encode_document(t[:60]) for t in documents[0]]
    result = perplexity(
        token_logprobs, docs, seq_len=384, batch_size=2, eod_id=tokenizer.eod_id, pad_id=tokenizer.pad_id
    )
    assert len(packed_rows(docs, 384, tokenizer.pad_id)) == 1
    # Reference: one document per row, right-padded (segment 0), float64 log-softmax in numpy.
    width = max(len(d) for d in docs)
    tokens = np.stack([np.pad(d, (0, width - len(d)), constant_values=tokenizer.pad_id) for d in docs])
    segment_ids = np.stack([np.arange(width) < len(d) for d in docs]).astype(np.int32)
    logits = forward(tokens, np.broadcast_to(np.arange(width, dtype=np.int32), tokens.shape), segment_ids)
    log_z = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
    nll = sum(
        float(np.sum(log_z[i, : len(d) - 1] - logits[i, np.arange(len(d) - 1), d[1:]]))
        for i, d in enumerate(docs)
    )
    assert result.num_tokens == sum(len(d) - 1 for d in docs)
    assert result.nll == pytest.approx(nll, rel=1e-5)
    assert result.nll_per_token == pytest.approx(nll / result.num_tokens, rel=1e-5)


@pytest.mark.slow
def test_short_rows_split_documents_but_score_each_token_once(token_logprobs, documents, tokenizer):
    _, docs = documents
    result = perplexity(
        token_logprobs, docs, seq_len=16, batch_size=4, eod_id=tokenizer.eod_id, pad_id=tokenizer.pad_id
    )
    assert result.num_tokens == sum(len(d) - 1 for d in docs)
    assert np.isfinite(result.perplexity) and result.bits_per_byte is None


def test_document_without_eod_is_refused(token_logprobs, tokenizer):
    with pytest.raises(ValueError, match="document 1 must be"):
        perplexity(
            token_logprobs,
            [np.array([1, 5, 2]), np.array([1, 5, 6])],
            seq_len=16,
            batch_size=1,
            eod_id=tokenizer.eod_id,
            pad_id=tokenizer.pad_id,
        )
