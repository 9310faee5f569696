"""The training pipeline on real text: batch contract, exact resume, batch-size plans, stages, hosts."""

import json
import math

import grain
import numpy as np
import pytest

from apertus_jax.data import mixture
from apertus_jax.data.config import BATCH_KEYS, parse_pipeline
from apertus_jax.data.demo_corpus import load_german_prose
from apertus_jax.data.masks import document_masks
from apertus_jax.data.pipeline import TrainIterator
from apertus_jax.data.run_tokenizer import demo_tokenizer

from .conftest import train_iterator

SEQ_LEN = 64


def three_component_config(german_jsonl, goldfish=None):
    """udhr (multilingual), german prose, and a repeated 8-document German subset; 2 stages."""
    return {
        "components": {
            "udhr": {"kind": "demo", "sources": ["udhr"]},
            "german": {"kind": "jsonl", "paths": [str(german_jsonl)]},
            "repeated": {"kind": "jsonl", "paths": [str(german_jsonl)], "take": 8},
        },
        "stages": [
            {"name": "stage1", "until_tokens": 47 * SEQ_LEN, "weights": {"udhr": 0.5, "german": 0.5}},
            {"name": "stage2", "weights": {"german": 0.3, "repeated": 0.7}, "seed": 11},
        ],
        "goldfish": goldfish or {"k": 4, "h": 13, "hash": "apertus"},
    }


def batch_plan(step):
    return 4 if step < 20 else 8  # a batch-size change at step 20


def take(iterator, count):
    return [next(iterator) for _ in range(count)]


def assert_same_batches(actual, expected):
    assert len(actual) == len(expected)
    for a, b in zip(actual, expected):
        for key in BATCH_KEYS:
            np.testing.assert_array_equal(a[key], b[key])


@pytest.fixture(scope="module")
def reference(tekken, german_jsonl):
    iterator = train_iterator(three_component_config(german_jsonl), tekken, SEQ_LEN, batch_plan)
    batches = take(iterator, 50)
    return batches, iterator.stats()


@pytest.mark.slow
def test_batch_contract(reference, tekken):
    batches, stats = reference
    assert stats["stage"] == "stage2" and stats["rows"] == 20 * 4 + 30 * 8
    for batch in batches:
        assert set(batch) == set(BATCH_KEYS)
        assert all(v.dtype == np.int32 and v.shape == batch["tokens"].shape for v in batch.values())
        np.testing.assert_array_equal(batch["tokens"][:, 1:], batch["targets"][:, :-1])
        segment_ids, positions, loss_mask = document_masks(batch["tokens"], tekken.eod_id)
        np.testing.assert_array_equal(batch["segment_ids"], segment_ids)
        np.testing.assert_array_equal(batch["positions"], positions)
        # Goldfish only zeroes the loss mask.
        assert (batch["loss_mask"] <= loss_mask).all()
    assert batches[0]["tokens"].shape == (4, SEQ_LEN) and batches[-1]["tokens"].shape == (8, SEQ_LEN)
    # Rows continue each other: the last target of a row is the first input of the next.
    np.testing.assert_array_equal(batches[0]["targets"][:-1, -1], batches[0]["tokens"][1:, 0])
    # The repeated subset went through several epochs in stage 2.
    assert stats["components"]["repeated"]["epochs"] > 2
    dropped = sum(((b["tokens"] != tekken.eod_id) & (b["loss_mask"] == 0)).sum() for b in batches)
    assert dropped > 0


RANDOM_SAVE_STEPS = sorted(int(s) for s in np.random.default_rng(2026).choice(np.arange(1, 50), 5, False))


# Five random save points, plus the batch holding the stage boundary (rows 44-47; the boundary is row 47),
# the batch after it, and the first step of the doubled batch size.
@pytest.mark.slow
@pytest.mark.parametrize("save_step", RANDOM_SAVE_STEPS + [11, 12, 20])
def test_resume_is_bitwise_identical(reference, tekken, german_jsonl, save_step):
    config = three_component_config(german_jsonl)
    first = train_iterator(config, tekken, SEQ_LEN, batch_plan)
    before = take(first, save_step)
    state = json.loads(json.dumps(first.get_state()))
    resumed = train_iterator(config, tekken, SEQ_LEN, batch_plan)
    resumed.set_state(state)
    after = take(resumed, 50 - save_step)
    assert_same_batches(before + after, reference[0])


def test_resume_with_the_mixed_hash_is_bitwise_identical(tekken, german_jsonl):
    """The mixed hash reads the packer's history of the row start; a restored iterator has the same."""
    config = three_component_config(german_jsonl, {"k": 4, "h": 50, "hash": "mixed"})
    expected = take(train_iterator(config, tekken, SEQ_LEN, batch_plan), 16)
    first = train_iterator(config, tekken, SEQ_LEN, batch_plan)
    before = take(first, 7)
    resumed = train_iterator(config, tekken, SEQ_LEN, batch_plan)
    resumed.set_state(json.loads(json.dumps(first.get_state())))
    assert_same_batches(before + take(resumed, 9), expected)
    # Rows are cut mid-document at SEQ_LEN 64, so some rows start with a non-empty history.
    assert any((b["loss_mask"][:, :20] == 0).any() for b in expected)


@pytest.mark.slow
def test_row_stream_does_not_depend_on_the_batch_plan(reference, tekken, german_jsonl):
    iterator = train_iterator(three_component_config(german_jsonl), tekken, SEQ_LEN, 2)
    rows = np.concatenate([b["tokens"] for b in take(iterator, 160)])
    np.testing.assert_array_equal(rows, np.concatenate([b["tokens"] for b in reference[0]]))


def test_orbax_checkpoint_round_trip(tekken, german_jsonl, tmp_path):
    ocp = pytest.importorskip("orbax.checkpoint")
    config = three_component_config(german_jsonl)
    iterator = train_iterator(config, tekken, SEQ_LEN, 4)
    take(iterator, 13)
    manager = ocp.CheckpointManager(tmp_path)
    manager.save(13, args=ocp.args.Composite(data_iter=grain.checkpoint.CheckpointSave(iterator)))
    manager.wait_until_finished()
    expected = take(iterator, 3)
    restored = train_iterator(config, tekken, SEQ_LEN, 4)
    manager.restore(13, args=ocp.args.Composite(data_iter=grain.checkpoint.CheckpointRestore(restored)))
    assert_same_batches(take(restored, 3), expected)


def test_hosts_split_each_global_batch(tekken, german_jsonl):
    config = {"components": {"german": {"kind": "jsonl", "paths": [str(german_jsonl)]}}, "goldfish": {"k": 0}}
    hosts = [train_iterator(config, tekken, SEQ_LEN, 6, process_index=p, process_count=3) for p in range(3)]
    batches = [next(h) for h in hosts]
    assert all(b["tokens"].shape == (2, SEQ_LEN) for b in batches)
    assert len({b["tokens"].tobytes() for b in batches}) == 3
    with pytest.raises(ValueError, match="divisible"):
        next(train_iterator(config, tekken, SEQ_LEN, 4, process_index=0, process_count=3))


@pytest.mark.slow
def test_taken_subset_keeps_held_out_documents_out(tekken, german_jsonl):
    """200 documents, take 150, many epochs: none of the 50 others ever shows up in training rows."""
    config = {
        "components": {"german": {"kind": "jsonl", "paths": [str(german_jsonl)], "take": 150}},
        "goldfish": {"k": 0},
    }
    iterator = train_iterator(config, tekken, 256, 16)
    rows = np.concatenate([b["tokens"] for b in take(iterator, 20)])
    assert iterator.stats()["components"]["german"]["epochs"] > 1.5
    stream = np.concatenate([rows[0], rows[1:, 1:].reshape(-1)]).astype("<i4").tobytes()  # undo the overlap
    spec = iterator.pipeline.components["german"]
    component = spec.load("german", tekken)
    kept = set(mixture.host_documents(component, spec, split_seed=0, process_index=0, process_count=1))
    kept_texts = {component.documents[i].tobytes() for i in kept}
    held_out = [component.documents[i] for i in range(200) if i not in kept]
    assert len(held_out) == 50
    for document in held_out:
        if document.tobytes() not in kept_texts:  # the corpus holds a few exact duplicates
            assert document.astype("<i4").tobytes() not in stream
    assert sum(component.documents[i].astype("<i4").tobytes() in stream for i in kept) > 100


def test_stage_running_out_of_documents_is_an_error(tekken, german_jsonl):
    config = {
        "components": {"german": {"kind": "jsonl", "paths": [str(german_jsonl)], "epochs": 1}},
        "stages": [{"until_tokens": 10**9}, {}],
    }
    iterator = train_iterator(config, tekken, 512, 64)
    with pytest.raises(ValueError, match="ran out of documents"):
        take(iterator, 100)


def test_finite_stream_ends_with_padding(tekken, german_jsonl):
    config = {"components": {"german": {"kind": "jsonl", "paths": [str(german_jsonl)], "epochs": 1}}}
    batches = list(train_iterator(config, tekken, 512, 8))
    last = batches[-1]
    assert (last["tokens"] == tekken.pad_id).any()
    assert (last["segment_ids"][last["tokens"] == tekken.pad_id] == 0).all()
    assert (last["loss_mask"][last["targets"] == tekken.pad_id] == 0).all()
    real = sum(int((b["targets"] != tekken.pad_id).sum()) for b in batches)
    component = parse_pipeline(config).components["german"].load("german", tekken)
    # Every token but the very first is a target exactly once.
    assert real == sum(len(d) for d in component.documents) - 1


def test_state_from_another_pipeline_is_rejected(tekken, german_jsonl):
    config = three_component_config(german_jsonl)
    state = train_iterator(config, tekken, SEQ_LEN, 4, seed=0).get_state()
    with pytest.raises(ValueError, match="different pipeline"):
        train_iterator(config, tekken, SEQ_LEN, 4, seed=1).set_state(state)


@pytest.mark.slow
def test_phased_curriculum_switches_components_at_the_boundary(tekken, german_jsonl):
    """Phased (Boldt): component A until a token boundary, then component B only."""
    config = {
        "components": {
            "a": {"kind": "demo", "sources": ["udhr"]},
            "b": {"kind": "jsonl", "paths": [str(german_jsonl)]},
        },
        "stages": [{"until_tokens": 8 * SEQ_LEN, "weights": {"a": 1}}, {"weights": {"b": 1}}],
        "goldfish": {"k": 0},
    }
    iterator = train_iterator(config, tekken, SEQ_LEN, 4)
    take(iterator, 2)
    stats = iterator.stats()
    assert stats["stage"] == "stage1" and stats["components"]["a"]["documents"] > 0
    assert "b" not in stats["components"]
    take(iterator, 2)
    stats = iterator.stats()
    assert stats["stage"] == "stage2" and set(stats["components"]) == {"b"}
    assert stats["components"]["b"]["documents"] > 0


def test_empty_raw_source_is_an_error(tekken, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"text": ""}\n')
    with pytest.raises(ValueError, match="no documents"):
        train_iterator({"components": {"e": {"kind": "jsonl", "paths": [str(empty)]}}}, tekken, 64, 1)


def test_global_batch_from_process_local_pieces(tekken, german_jsonl):
    """How the trainer assembles the global batch (here one process holding all 8 CPU devices)."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    config = {"components": {"german": {"kind": "jsonl", "paths": [str(german_jsonl)]}}}
    local = next(train_iterator(config, tekken, SEQ_LEN, 8, jax.process_index(), jax.process_count()))
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    sharding = NamedSharding(mesh, PartitionSpec("data"))
    batch = {k: jax.make_array_from_process_local_data(sharding, v) for k, v in local.items()}
    assert batch["tokens"].shape == (8, SEQ_LEN) and len(batch["tokens"].sharding.device_set) == 8
    np.testing.assert_array_equal(np.asarray(batch["loss_mask"]), local["loss_mask"])


def test_tokenizer_without_pad_token_keeps_eod_targets(german_jsonl, tmp_path):
    """HF tokenizers without a pad token fall back to pad = EoD; real EoDs must stay targets."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from apertus_jax.tokenizers.hf import HFTokenizer

    texts = [json.loads(line)["text"] for line in german_jsonl.read_text(encoding="utf-8").splitlines()[:50]]
    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=300, special_tokens=["</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    hf.save(str(tmp_path / "tokenizer.json"))
    tokenizer = HFTokenizer(str(tmp_path / "tokenizer.json"))
    assert tokenizer.pad_id == tokenizer.eod_id
    config = {"components": {"german": {"kind": "jsonl", "paths": [str(german_jsonl)]}}, "goldfish": {"k": 0}}
    batches = take(train_iterator(config, tokenizer, SEQ_LEN, 4), 6)
    eod_targets = 0
    for batch in batches:
        assert (batch["segment_ids"] > 0).all()  # an endless stream has no padding
        last_of_document = (batch["targets"] == tokenizer.eod_id) & (batch["tokens"] != tokenizer.eod_id)
        assert (batch["loss_mask"][last_of_document] == 1).all()
        eod_targets += int(last_of_document.sum())
    assert eod_targets > 0


def test_length_buckets_are_recorded_in_the_state_and_resume_bitwise(tekken, german_jsonl):
    """A component upsampling its longer documents (>= 60 tokens: 70% of its tokens) beside a plain one."""
    config = {
        "components": {
            "bucketed": {
                "kind": "jsonl",
                "paths": [str(german_jsonl)],
                "length_buckets": {"edges": [60], "token_shares": [0.3, 0.7]},
            },
            "plain": {"kind": "jsonl", "paths": [str(german_jsonl)], "take": 50},
        }
    }
    first = train_iterator(config, tekken, SEQ_LEN, 4)
    before = take(first, 5)
    state = json.loads(json.dumps(first.get_state()))
    recorded = state["length_buckets"]["bucketed"]
    assert recorded["edges"] == [60] and recorded["token_shares"] == [0.3, 0.7]
    assert sum(recorded["host_documents"]) == 200 and min(recorded["host_documents"]) > 0
    assert (
        set(state["length_buckets"]) == {"bucketed"}
        and first.stats()["length_buckets"]["bucketed"] == recorded
    )
    after = take(first, 5)
    resumed = train_iterator(config, tekken, SEQ_LEN, 4)
    resumed.set_state(state)
    assert_same_batches(take(resumed, 5), after)
    assert len(before) == 5


def test_mixed_goldfish_drops_the_same_targets_of_a_document_in_every_epoch(tekken, german_jsonl, tmp_path):
    """A ~200-token document repeated over 40 epochs at seq_len 1024, mixed with shuffled German prose:
    it lands at many row offsets, is cut by row boundaries and follows different neighbours, yet the
    content-only hash drops exactly the same targets every time (docs/goldfish.md)."""
    document = next(d for d in load_german_prose()[200:] if d["doc_id"] == "fortunes-de/dessert/6")
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"text": document["text"], "id": document["doc_id"]}) + "\n", encoding="utf-8")
    config = {
        "components": {
            "doc": {"kind": "jsonl", "paths": [str(path)], "weight": 0.4},
            "german": {"kind": "jsonl", "paths": [str(german_jsonl)], "weight": 0.6},
        },
        "goldfish": {"k": 4, "h": 50, "hash": "mixed"},
    }
    seq_len = 1024
    iterator = train_iterator(config, tekken, seq_len, 2)
    tokens = tekken.encode_document(document["text"])
    targets, loss_mask = [], []
    while iterator.stats()["components"]["doc"]["documents"] < 42:
        batch = next(iterator)
        targets.extend(batch["targets"])
        loss_mask.extend(batch["loss_mask"])
    targets, loss_mask = np.concatenate(targets), np.concatenate(loss_mask)  # the target stream
    # Occurrences of the document's targets (all its tokens after <s>) in the target stream.
    window = np.lib.stride_tricks.sliding_window_view(targets, len(tokens) - 1)
    starts = np.flatnonzero((window == tokens[1:]).all(axis=1))[:40]
    assert len(starts) == 40
    assert len({s % seq_len for s in starts}) > 30  # many row offsets ...
    assert sum((s % seq_len) + len(tokens) - 1 > seq_len for s in starts) >= 3  # ... some cut by a row end
    masks = np.stack([loss_mask[s : s + len(tokens) - 1] for s in starts])
    # Inside the document only Goldfish zeroes the loss mask (no EoD input, no padding).
    hash_dropped = masks == 0
    assert 20 < hash_dropped[0].sum() < 80
    np.testing.assert_array_equal(hash_dropped, np.broadcast_to(hash_dropped[0], hash_dropped.shape))


_SEQ_LEN, _ROWS = 64, 4


def _two_stage_config():
    return {
        "components": {
            "prose": {"kind": "demo", "sources": ["german_prose"], "weight": 0.5},
            "udhr": {"kind": "demo", "sources": ["udhr"], "weight": 0.5},
        },
        "stages": [
            {"name": "mixed", "until_tokens": 5 * _ROWS * _SEQ_LEN, "weights": {"prose": 0.5, "udhr": 0.5}},
            {"name": "udhr", "until_tokens": None, "weights": {"udhr": 1.0}},
        ],
        "goldfish": {"k": 0},
    }


def _walk_targets(iterator, stage: int, rows: int) -> np.ndarray:
    """Independent count: walks stage `stage`'s (component, document) stream and attributes stream tokens
    1 .. rows * T (the targets of its first `rows` rows) to their components."""
    packer = iterator._stage_packer(stage)
    counts = np.zeros(len(iterator.components), np.int64)
    position, index = 0, 0
    end = rows * _SEQ_LEN
    while position <= end:
        component, document = packer.stream[index]
        length = len(iterator.components[component].documents[document])
        first, last = max(position, 1), min(position + length - 1, end)
        counts[component] += max(0, last - first + 1)
        position, index = position + length, index + 1
    return counts


@pytest.mark.slow
def test_tokens_consumed_match_the_stream_across_a_stage_change():
    iterator = train_iterator(_two_stage_config(), demo_tokenizer(1024), _SEQ_LEN, _ROWS)
    for _ in range(8):
        next(iterator)
    counts = iterator.tokens_consumed()
    expected = _walk_targets(iterator, 0, 5 * _ROWS) + _walk_targets(iterator, 1, 3 * _ROWS)
    assert counts == expected.tolist()
    assert sum(counts) == 8 * _ROWS * _SEQ_LEN and min(counts) > 0
    # The counts are part of the iterator state: a restored iterator continues them exactly.
    restored = train_iterator(_two_stage_config(), demo_tokenizer(1024), _SEQ_LEN, _ROWS)
    restored.set_state(json.loads(json.dumps(iterator.get_state())))
    assert restored.tokens_consumed() == counts
    next(iterator), next(restored)
    assert restored.tokens_consumed() == iterator.tokens_consumed()
    assert iterator.consumed()["tokens"] == dict(zip(["prose", "udhr"], iterator.tokens_consumed()))


def test_a_component_read_more_than_once_is_said_at_start_and_at_each_new_pass(tekken, german_jsonl, caplog):
    """The start-up line gives the passes the planned tokens make over each component (from its documents' mean
    length), and a line follows each pass begun beyond the first (the user's run that read its set 1.6 times
    silently)."""
    config = {"components": {"german": {"kind": "jsonl", "paths": [str(german_jsonl)]}}}
    pipeline = parse_pipeline(config)
    component = pipeline.components["german"].load("german", tekken)
    tokens = sum(len(d) for d in component.documents)
    planned = int(1.6 * tokens)
    caplog.set_level("INFO")
    iterator = TrainIterator(
        pipeline, tekken, seq_len=512, batch_size=8, process_index=0, process_count=1, seed=0,
        planned_tokens=planned,
    )  # fmt: skip
    assert iterator.planned_passes(planned)["german"] == pytest.approx(planned / tokens)
    start = [r.getMessage() for r in caplog.records if "tokens planned read it" in r.getMessage()]
    assert start == [
        f"data: german, 200 documents of ~{component.mean_tokens:.0f} tokens per data shard: the {planned:,} "
        "tokens planned read it 1.60 times (repeated: epochs=None)"
    ]
    caplog.clear()
    batches = math.ceil(planned / (8 * 512))
    take(iterator, batches)
    passes = [r.getMessage() for r in caplog.records if "begins pass" in r.getMessage()]
    assert len(passes) == 1 and passes[0].startswith("data: german begins pass 2 over its 200 documents")
    # A resumed iterator does not announce again the pass it is already in; the next one it does.
    caplog.clear()
    resumed = train_iterator(config, tekken, 512, 8)
    resumed.set_state(iterator.get_state())
    take(resumed, batches)
    passes = [r.getMessage() for r in caplog.records if "begins pass" in r.getMessage()]
    assert passes and all(not p.startswith("data: german begins pass 2 ") for p in passes)
