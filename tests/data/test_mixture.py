"""Components: fixed subsets that survive repetition, fresh shuffles per epoch, host shares, sorted order."""

import collections

import grain
import numpy as np
import pytest

from apertus_jax.data import mixture
from apertus_jax.data.config import parse_pipeline


def spec(**overrides):
    return parse_pipeline(
        {"components": {"c": {"kind": "jsonl", "paths": ["unused"], **overrides}}}
    ).components["c"]


def id_component(count, scores=None):
    documents = [np.array([i], dtype=np.int32) for i in range(count)]
    return mixture.Component("c", documents, mean_tokens=1.0, scores=scores)


def stream_ids(dataset):
    return [index for _, index in dataset]


def test_grain_shuffle_slice_repeat_redraws_the_subset():
    """Why components re-source their index list: Grain's slice passes the epoch to the shuffle below."""
    naive = grain.MapDataset.range(10).shuffle(seed=0).slice(slice(0, 4)).repeat(5)
    assert len(set(naive)) > 4


def test_take_then_repeat_keeps_the_subset_with_a_fresh_order_each_epoch():
    component = id_component(10)
    dataset = mixture.component_dataset(
        component, 0, spec(take=4, epochs=5), seed=7, split_seed=0, process_index=0, process_count=1
    )
    ids = stream_ids(dataset)
    counts = collections.Counter(ids)
    assert len(ids) == 20 and len(counts) == 4 and set(counts.values()) == {5}
    held_out = set(range(10)) - set(counts)
    assert len(held_out) == 6 and not held_out & set(ids)
    epochs = [ids[i : i + 4] for i in range(0, 20, 4)]
    assert all(sorted(e) == sorted(counts) for e in epochs)
    assert len({tuple(e) for e in epochs}) > 1  # reshuffled per epoch
    # The subset depends on split_seed only, not on the stage seed.
    other_stage = mixture.component_dataset(
        component, 0, spec(take=4, epochs=5), seed=8, split_seed=0, process_index=0, process_count=1
    )
    assert set(stream_ids(other_stage)) == set(counts)


def test_hosts_get_disjoint_shares_covering_everything():
    component = id_component(103)
    shares = [
        set(mixture.host_documents(component, spec(), split_seed=0, process_index=p, process_count=4))
        for p in range(4)
    ]
    assert sum(map(len, shares)) == 103 and set().union(*shares) == set(range(103))
    with pytest.raises(ValueError, match="processes"):
        mixture.host_documents(id_component(3), spec(), split_seed=0, process_index=3, process_count=4)


def test_sorted_order_ascends_by_score_every_epoch():
    scores = np.array([5.0, 1.0, 4.0, 2.0, 3.0])
    dataset = mixture.component_dataset(
        id_component(5, scores),
        0,
        spec(order="sorted", epochs=2, score_field="score"),
        seed=0,
        split_seed=0,
        process_index=0,
        process_count=1,
    )
    assert stream_ids(dataset) == [1, 3, 4, 2, 0] * 2


def test_mix_follows_token_shares():
    lengths = {0: 100, 1: 10}  # tokens per document of each component
    long_docs = grain.MapDataset.source([(0, i) for i in range(10)]).repeat()
    short_docs = grain.MapDataset.source([(1, i) for i in range(10)]).repeat()
    mixed = mixture.mix_components([long_docs, short_docs], [0.5, 0.5], [100.0, 10.0])
    tokens = collections.Counter()
    for index in range(2200):
        component, _ = mixed[index]
        tokens[component] += lengths[component]
    assert tokens[0] == pytest.approx(tokens[1], rel=0.02)


def test_derive_seed_is_stable():
    assert mixture.derive_seed(3, "web") == mixture.derive_seed(3, "web") != mixture.derive_seed(3, "code")
    assert 0 <= mixture.derive_seed(0, 1) < 2**32


@pytest.fixture(scope="module")
def demo_mixed_lengths():
    """The demo corpus's German prose (short documents) and UDHR (long ones) as one component, demo BPE."""
    from apertus_jax.data.run_tokenizer import demo_tokenizer

    def load(length_buckets):
        config = {"kind": "demo", "sources": ["udhr", "german_prose"], "length_buckets": length_buckets}
        spec = parse_pipeline({"components": {"demo": config}}).components["demo"]
        return spec.load("demo", demo_tokenizer(1024)), spec

    return load


def _bucket_token_shares(component, dataset, edges, draws):
    tokens = np.zeros(len(edges) + 1)
    for position in range(draws):
        _, index = dataset[position]
        length = len(component.documents[index])
        tokens[mixture.length_bucket_of(np.array([length]), edges)[0]] += length
    return tokens / tokens.sum()


@pytest.mark.slow
@pytest.mark.parametrize("shares", [[0.2, 0.2, 0.6], [0.1, 0.6, 0.3]])
def test_length_buckets_give_their_configured_token_shares(demo_mixed_lengths, shares):
    edges = [100, 3000]
    component, spec = demo_mixed_lengths({"edges": edges, "token_shares": shares})
    lengths = np.array([len(d) for d in component.documents])
    natural = (
        np.bincount(mixture.length_bucket_of(lengths, edges), weights=lengths, minlength=3) / lengths.sum()
    )
    assert np.abs(natural - shares).max() > 0.1  # the buckets really reweight (natural ~[0.12, 0.15, 0.73])
    dataset, mean_tokens, counts = mixture.bucketed_component_dataset(
        component, 0, spec, seed=3, split_seed=0, process_index=0, process_count=1
    )
    assert sum(counts) == len(component.documents) and min(counts) > 100
    measured = _bucket_token_shares(component, dataset, edges, draws=30_000)
    np.testing.assert_allclose(measured, shares, atol=0.02)
    # The mean tokens per drawn document that the stage mixture divides the component's weight by.
    drawn = [len(component.documents[dataset[p][1]]) for p in range(30_000)]
    assert mean_tokens == pytest.approx(np.mean(drawn), rel=0.05)


@pytest.mark.slow
def test_a_bucket_without_documents_is_refused(demo_mixed_lengths):
    component, spec = demo_mixed_lengths({"edges": [100, 10**6], "token_shares": [0.5, 0.3, 0.2]})
    with pytest.raises(ValueError, match="length bucket 2 .* has token share 0.2 but no document"):
        mixture.bucketed_component_dataset(
            component, 0, spec, seed=0, split_seed=0, process_index=0, process_count=1
        )
