"""The GPTDataset sample stream: rows, indices and Goldfish masks equal those of a transcription of the fork's
GPTDataset, BlendedDataset and helpers.cpp (`megatron_reference.py`) on German prose from the demo corpus."""

import json

import numpy as np
import pytest

from apertus_jax.data.config import BATCH_KEYS
from apertus_jax.data.demo_corpus import load_german_prose
from apertus_jax.data.goldfish.drop_masks import GoldfishSpec, goldfish_drop_mask
from apertus_jax.data.megatron import gpt_samples as samples
from apertus_jax.data.megatron.indexed import write_indexed_dataset
from apertus_jax.optim.batch_plan import BatchSizePlan

from . import megatron_reference as reference

SEQ_LEN, NUM_SAMPLES = 64, 2000
# German prose documents per prefix: "one" holds more than 2,000 rows of 64 tokens, "three" about a third.
SLICES = {"one": (0, 3300), "three": (3300, 5100), "a": (6000, 6400), "b": (7000, 7700), "c": (8000, 8250)}
CONFIGS = {
    # name: (blend, seed, split, add_extra_token, expected epochs and separate last epoch per prefix)
    "one file, 1 epoch": ("one", 1234, "969,30,1", True, [(1, False)]),
    "one file, 1 epoch, other seed, no extra token": ("one", 5, "969,30,1", False, [(1, False)]),
    "one file, 3 epochs": ("three", 1234, "98,2", True, [(3, True)]),
    "one file, 3 epochs, no extra token": ("three", 5, "98,2", False, [(3, True)]),
    # A weighted single prefix is a blend of one: its stream is built for 0.5% more samples.
    "one file as a blend of one": ("1 three", 1234, "98,2", True, [(3, True)]),
    "blend of three": ("0.5 a 0.3 b 0.2 c", 1234, "969,30,1", True, [(5, True), (2, True), (3, False)]),
    "blend of three, other seed, no extra token": (
        "5 a 3 b 2 c",
        5,
        "98,2",
        False,
        [(5, True), (2, True), (3, False)],
    ),
}


@pytest.fixture(scope="module")
def prefixes(tekken, tmp_path_factory):
    """{name: (prefix, documents)}: tekken ids of German prose slices written as int32 Megatron datasets."""
    directory, prose, written = tmp_path_factory.mktemp("megatron"), load_german_prose(), {}
    for name, (low, high) in SLICES.items():
        documents = [
            np.asarray(ids, np.int32) for ids in tekken.encode_batch([d["text"] for d in prose[low:high]])
        ]
        write_indexed_dataset(str(directory / name), documents, np.int32)
        written[name] = (str(directory / name), documents)
    return written


def _streams(prefixes, blend, seed, split, extra):
    words = blend.split()
    if len(words) == 1:
        ours = samples.gpt_samples(
            prefixes[blend][0],
            seq_len=SEQ_LEN,
            seed=seed,
            split=split,
            num_samples=NUM_SAMPLES,
            add_extra_token=extra,
        )
        theirs = reference.GPTDatasetReference(prefixes[blend][1], split, NUM_SAMPLES, SEQ_LEN, seed, extra)
        return ours, theirs, [ours]
    weights, names = [float(w) for w in words[::2]], words[1::2]
    ours = samples.gpt_samples(
        " ".join(f"{w} {prefixes[n][0]}" for w, n in zip(weights, names)),
        seq_len=SEQ_LEN,
        seed=seed,
        split=split,
        num_samples=NUM_SAMPLES,
        add_extra_token=extra,
    )
    documents = [prefixes[n][1] for n in names]
    return (
        ours,
        reference.BlendedReference(documents, weights, split, NUM_SAMPLES, SEQ_LEN, seed, extra),
        ours.parts,
    )


@pytest.mark.parametrize("config", CONFIGS)
def test_rows_equal_the_forks_gpt_dataset(prefixes, config):
    blend, seed, split, extra, epochs = CONFIGS[config]
    ours, theirs, parts = _streams(prefixes, blend, seed, split, extra)
    assert [(p.num_epochs, p.separate_last_epoch) for p in parts] == epochs
    assert len(ours) == len(theirs) >= NUM_SAMPLES
    rows = np.stack([ours[i] for i in range(NUM_SAMPLES)])
    assert rows.shape == (NUM_SAMPLES, SEQ_LEN + extra) and rows.dtype == np.int64
    np.testing.assert_array_equal(rows, np.stack([theirs[i] for i in range(NUM_SAMPLES)]))
    if isinstance(ours, samples.GPTSamples):
        np.testing.assert_array_equal(ours.document_index, theirs.document_index)
        np.testing.assert_array_equal(ours.sample_index, theirs.sample_index)
        np.testing.assert_array_equal(ours.shuffle_index, theirs.shuffle_index)
        assert ours.sample_index.dtype == np.int32 and ours.shuffle_index.dtype == np.uint32
    else:
        np.testing.assert_array_equal(ours.dataset_index, theirs.dataset_index)
        np.testing.assert_array_equal(ours.dataset_sample_index, theirs.dataset_sample_index)
        assert [p.num_samples for p in parts] == theirs.buffers  # each prefix's share plus 0.5%
    # Real rows: the first holds German prose that the tokenizer reads back.
    assert len(np.unique(rows)) > 1000


@pytest.mark.parametrize("config", ["one file, 3 epochs", "blend of three, other seed, no extra token"])
@pytest.mark.parametrize("k, h", [(50, 50), (4, 8)])
def test_goldfish_of_the_rows_equals_the_forks_apply_goldfish(prefixes, config, k, h):
    torch = pytest.importorskip("torch")
    blend, seed, split, extra, _ = CONFIGS[config]
    ours, _, _ = _streams(prefixes, blend, seed, split, extra)
    # The fork's table: torch.rand(1_000_003) of its seed (test_goldfish.py checks the shipped copy is that).
    table, dropped = torch.rand(1_000_003, generator=torch.Generator().manual_seed(2971215073)), 0
    for i in range(NUM_SAMPLES):
        labels = samples.fork_labels(ours[i], extra)
        mask = goldfish_drop_mask(labels, k, h, "apertus")
        np.testing.assert_array_equal(mask, reference.apply_goldfish(labels, k, h, table))
        dropped += int(mask.sum())
    windows = NUM_SAMPLES * (SEQ_LEN - h + 1)
    assert 0.5 / k < dropped / windows < 1.5 / k  # the masks drop about 1 in k hashed labels


def test_fork_labels_shift_and_zero_the_pad():
    text = np.array([7, 8, 9, 3])
    np.testing.assert_array_equal(samples.fork_labels(text, True), [8, 9, 3])
    np.testing.assert_array_equal(samples.fork_labels(text, False), [8, 9, 3, 0])
    np.testing.assert_array_equal(samples.fork_labels(text, False, pad_id=9), [8, 0, 3, 0])


@pytest.mark.parametrize("extra", [True, False])
@pytest.mark.parametrize("seq_len", [2, 7, 64])
def test_sample_index_equals_the_cpp_loop(extra, seq_len):
    # Format test: random lengths, zero-length sequences included (Megatron files may hold them).
    rng = np.random.default_rng(seq_len)
    sizes = rng.integers(0, 40, 300).astype(np.int32)
    sizes[[0, 5, 299]] = [0, 0, 0]
    documents = np.tile(np.arange(300, dtype=np.int32), 2)
    rng.shuffle(documents)
    tokens = int(sizes.sum())
    ours = samples.sample_index(sizes, documents, seq_len, 2, tokens, extra)
    expected = reference.build_sample_idx(sizes, documents, seq_len, 2, tokens, int(extra))
    assert ours.shape == ((2 * tokens - extra) // seq_len + 1, 2)
    np.testing.assert_array_equal(ours, expected)


@pytest.mark.parametrize(
    "weights", [[0.5, 0.3, 0.2], [1 / 3, 1 / 3, 1 / 3], [0.9, 0.1], [0.25, 0.25, 0.3, 0.2]]
)
def test_blending_index_equals_the_cpp_loop(weights):
    ours = samples.blending_index(weights, 5000)
    theirs = reference.build_blending_indices(weights, 5000)
    np.testing.assert_array_equal(ours[0], theirs[0])
    np.testing.assert_array_equal(ours[1], theirs[1])
    counts = np.bincount(ours[0], minlength=len(weights)) / 5000
    np.testing.assert_allclose(counts, weights, atol=1e-3)


@pytest.mark.parametrize("split", ["969,30,1", "98,2,0", "1,1,1", "0.7 0.2 0.1"])
@pytest.mark.parametrize("count", [1, 10, 999, 12345])
def test_split_ranges_equal_megatrons(split, count):
    for index, part in enumerate(samples.PARTS):
        if part == "test" and split.endswith(",0"):
            with pytest.raises(ValueError, match="gives the test part no sequences"):
                samples.split_range(split, count, part)
        else:
            assert samples.split_range(split, count, part) == reference.split_range(split, count, index)


def test_the_validation_part_equals_the_forks(prefixes):
    # The last 2% of 1,800 documents: 36 short ones, so 2,000 rows take 58 epochs of them.
    prefix, documents = prefixes["three"]
    ours = samples.gpt_samples(
        prefix, seq_len=SEQ_LEN, seed=9, split="98,2", num_samples=NUM_SAMPLES, part="valid"
    )
    theirs = reference.GPTDatasetReference(documents, "98,2", NUM_SAMPLES, SEQ_LEN, 9, True, part=1)
    assert ours.num_epochs == theirs.num_epochs == 58
    assert len(ours.document_index) == ours.num_epochs * 36
    np.testing.assert_array_equal(
        np.stack([ours[i] for i in range(NUM_SAMPLES)]), np.stack([theirs[i] for i in range(NUM_SAMPLES)])
    )


def test_bad_requests_fail_with_one_line(prefixes):
    prefix = prefixes["a"][0]
    with pytest.raises(ValueError, match="needs weights: 'w1 prefix1 w2 prefix2'"):
        samples.gpt_samples(f"{prefix} {prefix}", seq_len=8, seed=0, split="1", num_samples=10)
    with pytest.raises(ValueError, match="split='0,1,0' gives the train part no sequences"):
        samples.gpt_samples(prefix, seq_len=8, seed=0, split="0,1,0", num_samples=10)
    with pytest.raises(ValueError, match="split='x' must hold 1 to 3 ratios"):
        samples.gpt_samples(prefix, seq_len=8, seed=0, split="x", num_samples=10)


def _take(batches, count):
    return [next(batches) for _ in range(count)]


@pytest.mark.slow
@pytest.mark.parametrize("extra", [True, False])
def test_batches_follow_the_stream_over_shards_a_batch_change_and_a_resume(prefixes, tekken, extra):
    blend = " ".join(f"{w} {prefixes[n][0]}" for w, n in ((0.5, "a"), (0.3, "b"), (0.2, "c")))
    stream = samples.gpt_samples(
        blend, seq_len=SEQ_LEN, seed=5, split="98,2", num_samples=60, add_extra_token=extra
    )
    plan = BatchSizePlan([(0, 4 * SEQ_LEN), (3 * 4 * SEQ_LEN, 8 * SEQ_LEN)])  # 4 rows, then 8 from step 3
    goldfish = GoldfishSpec(k=4, h=13)

    def batches(shard=0, num_shards=1):
        return samples.GPTBatches(
            stream, tekken, goldfish, seq_len=SEQ_LEN, batch_size=plan, shard=shard, num_shards=num_shards
        )

    whole = _take(batches(), 6)  # 3 * 4 + 3 * 8 = 36 rows
    rows = samples.first_rows(stream, 36)
    tokens = np.concatenate([b["tokens"] for b in whole])
    targets = np.concatenate([b["targets"] for b in whole])
    np.testing.assert_array_equal(tokens, rows[:, :SEQ_LEN])
    np.testing.assert_array_equal(targets[:, : SEQ_LEN - 1], rows[:, 1:SEQ_LEN])
    np.testing.assert_array_equal(targets[:, -1], rows[:, SEQ_LEN] if extra else tekken.pad_id)
    loss_mask = np.concatenate([b["loss_mask"] for b in whole])
    assert (loss_mask[:, -1] == 0).all() != extra  # the fork's pad label is never a target
    dropped = goldfish_drop_mask(targets, 4, 13, "apertus")
    assert (
        dropped.sum() > 100 and not loss_mask[dropped].any()
    )  # the fork's Goldfish drops are out of the loss

    # Two shards: per step, shard 0's rows then shard 1's are the global batch.
    halves = [_take(batches(k, 2), 6) for k in range(2)]
    for step, batch in enumerate(whole):
        np.testing.assert_array_equal(np.concatenate([h[step]["tokens"] for h in halves]), batch["tokens"])

    first = batches()
    _take(first, 4)
    resumed = batches()
    resumed.set_state(json.loads(json.dumps(first.get_state())))
    for a, b in zip(_take(resumed, 2), whole[4:]):
        for key in BATCH_KEYS:
            np.testing.assert_array_equal(a[key], b[key])
    assert resumed.consumed() == {"tokens": {"megatron": 36 * (SEQ_LEN - 1 + extra)}}
    assert len(stream) == 60 and len(_take(resumed, 3)) == 3  # rows 36 .. 59
    with pytest.raises(ValueError, match="the sample stream holds 60 rows and step 9 needs rows up to 68"):
        next(resumed)
