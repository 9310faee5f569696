"""Goldfish masks: bit-compatibility with the Apertus rule, content-only dependence, mixed-hash rate."""

import functools
import hashlib
import json
import pathlib

import grain
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apertus_jax.data.demo_corpus import load_german_prose
from apertus_jax.data.goldfish import drop_masks as goldfish
from apertus_jax.data.goldfish.drop_masks import goldfish_drop_mask, goldfish_table
from apertus_jax.data.packing import PackedRows
from apertus_jax.tokenizers import load_tokenizer

FIXTURE = pathlib.Path(__file__).parents[1] / "fixtures" / "goldfish_apertus_k50_h50.json"


def reference_drop_mask(labels, k, h, table):
    """Straightforward per-window Apertus rule with Python ints and explicit int64 wrap-around."""
    dropped = [False] * len(labels)
    for i in range(h - 1, len(labels)):
        product = 1
        for label in labels[i - h + 1 : i + 1]:
            product = (product * int(label)) & ((1 << 64) - 1)
        if product >= 1 << 63:
            product -= 1 << 64
        key = product % 1_000_003  # Python's remainder is non-negative, like torch's %.
        dropped[i] = bool(table[key] < np.float32(1 / k))
    return dropped


def fixture_vectors():
    """Fixed label vectors: random ids, small ids (many zero products), odd ids (no zero product)."""
    rng = np.random.default_rng(20260514)
    return {
        "random_ids": rng.integers(4, 131_072, size=700),
        "small_ids": rng.integers(4, 40, size=700),
        "odd_ids": rng.integers(2, 65_536, size=700) * 2 + 1,
    }


def write_fixture():
    """Regenerates the fixture from the slow reference: `python tests/data/goldfish/test_drop_masks.py`."""
    table = goldfish_table()
    cases = {}
    for name, labels in fixture_vectors().items():
        dropped = reference_drop_mask(labels.tolist(), 50, 50, table)
        cases[name] = {"labels": labels.tolist(), "dropped": [i for i, d in enumerate(dropped) if d]}
    payload = {"table_sha256": goldfish.TABLE_SHA256, "k": 50, "h": 50, "cases": cases}
    FIXTURE.write_text(json.dumps(payload, separators=(",", ":")) + "\n")


def test_table_matches_shipped_checksum_and_apertus_entry_zero():
    table = goldfish_table()
    assert table.shape == (1_000_003,) and table.dtype == np.float32
    # docs/recipe.md 3: all zero-product windows read table[0] = 0.2337.
    assert table[0] == pytest.approx(0.2337, abs=1e-4)
    assert not table.flags.writeable


def test_table_is_torch_rand_of_the_apertus_seed():
    torch = pytest.importorskip("torch")
    generator = torch.Generator().manual_seed(2971215073)
    np.testing.assert_array_equal(goldfish_table(), torch.rand(1_000_003, generator=generator).numpy())


def test_fixture_masks_equal_vectorized_and_reference_rule():
    payload = json.loads(FIXTURE.read_text())
    assert payload["table_sha256"] == goldfish.TABLE_SHA256
    total_dropped = 0
    for name, case in payload["cases"].items():
        labels = np.array(case["labels"], dtype=np.int32)
        expected = np.zeros(len(labels), dtype=bool)
        expected[case["dropped"]] = True
        np.testing.assert_array_equal(goldfish_drop_mask(labels, k=50, h=50), expected, err_msg=name)
        total_dropped += len(case["dropped"])
    assert total_dropped > 10  # the fixture exercises real drops
    labels = payload["cases"]["random_ids"]["labels"][:200]
    assert (
        reference_drop_mask(labels, 50, 50, goldfish_table())
        == goldfish_drop_mask(np.array(labels), 50, 50).tolist()
    )


@settings(max_examples=40, deadline=None)
@given(
    labels=st.lists(st.integers(0, 131_071), min_size=0, max_size=120),
    k=st.integers(1, 8),
    h=st.integers(1, 70),
)
def test_vectorized_equals_reference_for_any_labels(labels, k, h):
    expected = reference_drop_mask(labels, k, h, goldfish_table())
    assert goldfish_drop_mask(np.array(labels, dtype=np.int64), k, h).tolist() == expected


def test_apertus_keeps_the_first_h_minus_1_positions_of_every_row():
    labels = np.random.default_rng(1).integers(4, 131_072, size=(3, 300))
    dropped = goldfish_drop_mask(labels, k=2, h=20, hash="apertus")
    assert not dropped[:, :19].any() and dropped[:, 19:].any()
    assert not goldfish_drop_mask(labels[:, :10], k=2, h=20, hash="apertus").any()


@pytest.mark.parametrize("hash_name", goldfish.TOKEN_HASHES)
def test_k0_disables(hash_name):
    labels = np.random.default_rng(1).integers(4, 131_072, size=(3, 300))
    assert not goldfish_drop_mask(labels, k=0, h=20, hash=hash_name).any()


@pytest.mark.parametrize("k", [2, 50])
def test_mixed_hash_drop_rate_is_1_over_k(k):
    labels = np.random.default_rng(2).integers(4, 131_072, size=100_000)
    rate = goldfish_drop_mask(labels, k=k, h=50, hash="mixed").mean()
    assert abs(rate - 1 / k) < 0.1 / k


@pytest.mark.parametrize("hash_name", goldfish.TOKEN_HASHES)
def test_same_document_same_mask_anywhere_in_any_batch(hash_name):
    """A 200-token document at row 0 offset 0 and at row 3 offset 517: same drops where the window lies
    inside the document, whatever the batch size and the other rows."""
    rng = np.random.default_rng(3)
    document = rng.integers(4, 131_072, size=200)
    batch_a = rng.integers(4, 131_072, size=(2, 1024))
    batch_a[0, :200] = document
    batch_b = rng.integers(4, 131_072, size=(5, 1024))
    batch_b[3, 517:717] = document
    h = 50
    mask_a = goldfish_drop_mask(batch_a, k=4, h=h, hash=hash_name)[0, h - 1 : 200]
    mask_b = goldfish_drop_mask(batch_b, k=4, h=h, hash=hash_name)[3, 517 + h - 1 : 717]
    np.testing.assert_array_equal(mask_a, mask_b)
    assert mask_a.sum() > 10
    # A row on its own gives the row's mask inside a batch.
    np.testing.assert_array_equal(
        goldfish_drop_mask(batch_b[3], k=4, h=h, hash=hash_name),
        goldfish_drop_mask(batch_b, k=4, h=h, hash=hash_name)[3],
    )


def test_mixed_hash_depends_on_the_whole_window_in_order():
    rng = np.random.default_rng(4)
    labels = rng.integers(4, 131_072, size=5_000)
    base = goldfish.goldfish_drop_mask(labels, k=2, h=8, hash="mixed")
    swapped = labels.copy()
    swapped[[100, 101]] = swapped[[101, 100]]
    changed = goldfish.goldfish_drop_mask(swapped, k=2, h=8, hash="mixed") != base
    assert changed[101:109].any() and not changed[:100].any() and not changed[109:].any()


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="k >= 0"):
        goldfish_drop_mask(np.arange(10), k=-1)
    with pytest.raises(ValueError, match="hash"):
        goldfish_drop_mask(np.arange(10), hash="md5")
    with pytest.raises(ValueError, match="integer"):
        goldfish_drop_mask(np.zeros(10, np.float32))


def test_table_checksum_mismatch_raises(monkeypatch):
    goldfish_table.cache_clear()
    monkeypatch.setattr(goldfish, "TABLE_SHA256", "0" * 64)
    try:
        with pytest.raises(ValueError, match="sha256"):
            goldfish_table()
    finally:
        goldfish_table.cache_clear()


def test_fixture_checksum_is_the_file_checksum():
    path = pathlib.Path(goldfish.__file__).parents[1] / "assets" / "goldfish_table.npy"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == goldfish.TABLE_SHA256


if __name__ == "__main__":
    write_fixture()


M64 = (1 << 64) - 1


def splitmix64(z):
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def reference_mixed_drop_mask(labels, k, h, eod_id, history):
    """Per-label content-only rule with Python ints: the h places ending at i, of i's own document (it
    starts after an EoD or where the -1 history ends), missing places are the sentinel 2^64 - 1."""
    ext = list(history) + list(labels)
    dropped = []
    for q in range(len(history), len(ext)):
        start = q
        while start > 0 and ext[start - 1] >= 0 and ext[start - 1] != eod_id:
            start -= 1
        window = [ext[n] if n >= start else M64 for n in range(q - h + 1, q + 1)]
        total = sum(
            splitmix64(value) * pow(0x9E3779B97F4A7C15, h - 1 - j, 1 << 64) for j, value in enumerate(window)
        )
        dropped.append(splitmix64(total & M64) < M64 // k)
    return dropped


@functools.cache
def tekken_documents(count=40):
    """Real German prose as packer documents `<s> ... </s>` (tekken ids), 30 to 400 tokens each."""
    tokenizer = load_tokenizer("tekken")
    documents = [tokenizer.encode_document(d["text"]) for d in load_german_prose()[:400]]
    return tokenizer.eod_id, [d for d in documents if 30 <= len(d) <= 400][:count]


def test_mixed_hash_matches_the_per_label_reference_on_real_text():
    eod_id, documents = tekken_documents()
    row = np.concatenate(documents[:3])[:300]
    history = np.concatenate([[-1] * 5, documents[5][:7]])  # h - 1 = 12 places, document starts at 5
    got = goldfish_drop_mask(row, k=3, h=13, hash="mixed", eod_id=eod_id, history=history)
    expected = reference_mixed_drop_mask(row.tolist(), 3, 13, eod_id, history.tolist())
    assert got.tolist() == expected and 60 < sum(expected) < 140


def document_mask_through_packer(documents, target, seq_len, h, k, eod_id):
    """Packs `documents` into rows of seq_len + 1, masks every row with its packer history, and returns
    the mask of the targets of `documents[target]` (its tokens after the first) in the target stream."""
    stream = grain.MapDataset.source([(0, i) for i in range(len(documents))])
    packer = PackedRows(stream, [documents], seq_len, pad_id=-2)
    masks = []
    for row in packer:
        history = packer.history(h - 1)
        masks.append(goldfish_drop_mask(row[1:], k, h, "mixed", eod_id=eod_id, history=history))
    dropped = np.concatenate(masks)  # dropped[p - 1] is the mask of stream token p
    start = sum(len(d) for d in documents[:target])
    return dropped[start : start + len(documents[target]) - 1]


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    seq_len=st.integers(8, 600),
    h=st.sampled_from([1, 2, 13, 50]),
)
def test_mixed_mask_of_a_document_depends_on_its_tokens_only(data, seq_len, h):
    """The same document after different neighbours, at any row offset and cut by any row boundaries
    gets the mask it gets alone at the start of a row."""
    eod_id, pool = tekken_documents()
    document = pool[0]
    alone = document_mask_through_packer([document], 0, len(document) + 1, h, 3, eod_id)
    before = data.draw(st.lists(st.integers(1, len(pool) - 1), max_size=6))
    after = data.draw(st.lists(st.integers(1, len(pool) - 1), min_size=1, max_size=2))
    documents = [pool[i] for i in before] + [document] + [pool[i] for i in after]
    packed = document_mask_through_packer(documents, len(before), seq_len, h, 3, eod_id)
    np.testing.assert_array_equal(packed, alone)
    assert alone.sum() > 10


@pytest.mark.slow
@pytest.mark.parametrize("hash_name", goldfish.HASHES)
def test_the_spec_dispatches_to_each_hash(hash_name):
    from apertus_jax.data.goldfish.canonical import canonical_drop_mask
    from apertus_jax.tokenizers import load_tokenizer

    tekken = load_tokenizer("tekken")
    prose = " ".join(d["text"] for d in load_german_prose()[:20])
    labels = tekken.encode_document(prose)[1 : 1 + 3 * 96].reshape(3, 96)
    spec = goldfish.GoldfishSpec(k=3, h=7, hash=hash_name)
    if hash_name == "canonical":
        expected = canonical_drop_mask(labels, tekken, 3, 7)
    else:
        expected = goldfish.goldfish_drop_mask(labels, 3, 7, hash_name, eod_id=tekken.eod_id)
    assert expected.sum() > 10
    np.testing.assert_array_equal(spec.drop_mask(labels, tekken), expected)


@pytest.mark.parametrize(
    "fields, message",
    [({"k": -1}, "k must be"), ({"h": 0}, "h must be"), ({"hash": "md5"}, "hash must be one of")],
)
def test_spec_fields_are_checked(fields, message):
    with pytest.raises(ValueError, match=message):
        goldfish.GoldfishSpec(**fields)
