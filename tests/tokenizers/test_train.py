"""SentencePiece BPE training: special ids at the documented layout, lossless, per-subset models, inputs."""

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apertus_jax.data.demo_corpus import load_demo_documents
from apertus_jax.tokenizers import load_tokenizer
from apertus_jax.tokenizers.train import (
    SPECIAL_IDS,
    BPEConfig,
    read_documents,
    subset_name,
    train_inputs,
    train_per_subset,
    train_sentencepiece,
)

CONFIG = BPEConfig(vocab_size=1200)  # > the sample's ~880 distinct characters + specials


@pytest.fixture(name="bpe", scope="module")
def fixture_bpe(tmp_path_factory, udhr_sample):
    path = str(tmp_path_factory.mktemp("bpe") / "udhr.model")
    train_sentencepiece(udhr_sample.values(), path, CONFIG)
    return path


def test_special_ids_match_pipeline(bpe):
    tokenizer = load_tokenizer(f"sentencepiece:{bpe}")
    assert SPECIAL_IDS == {"unk_id": 0, "bos_id": 1, "eos_id": 2, "pad_id": 3}
    assert (tokenizer.bod_id, tokenizer.eod_id, tokenizer.pad_id) == (1, 2, 3)
    assert tokenizer.vocab_size == 1200
    assert tokenizer.name == "sentencepiece:udhr.model" and len(tokenizer.checksum) == 64


def test_lossless_round_trip(bpe, udhr_sample):
    tokenizer = load_tokenizer(f"sentencepiece:{bpe}")
    unseen = "Grüße aus Zürich:  42 Äpfel\n\tund ein 🍎 (unseen emoji)."
    texts = [*udhr_sample.values(), unseen]
    for text, ids in zip(texts, tokenizer.encode_batch(texts)):
        assert ids == tokenizer.encode(text)
        assert tokenizer.decode(ids) == text
        assert 0 not in ids  # byte fallback, never <unk>
    document = tokenizer.encode_document(unseen)
    assert document[0] == 1 and document[-1] == 2 and tokenizer.decode(document) == unseen


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_round_trip_any_text(bpe, text):
    tokenizer = load_tokenizer(f"sentencepiece:{bpe}")
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_bpe_learns_frequent_words(bpe):
    tokenizer = load_tokenizer(f"sentencepiece:{bpe}")
    # "and" occurs in several sample sentences: one piece "▁and" (with the dummy-prefix space).
    assert len(tokenizer.encode("and")) == 1
    assert len(tokenizer.encode("Xq7Zv")) >= 4


def test_per_subset(tmp_path, udhr_sample):
    subsets = {
        "latin": [udhr_sample[c] for c in ("eng", "deu_1996", "vie", "yor")],
        "cyrillic_greek": [udhr_sample[c] for c in ("rus", "ell_monotonic")],
    }
    paths = train_per_subset(subsets, str(tmp_path), BPEConfig(vocab_size=400))
    assert sorted(os.listdir(tmp_path)) == ["cyrillic_greek.model", "latin.model"]
    latin = load_tokenizer(f"sentencepiece:{paths['latin']}")
    cyrillic = load_tokenizer(f"sentencepiece:{paths['cyrillic_greek']}")
    text = udhr_sample["rus"]
    assert len(cyrillic.encode(text)) < len(latin.encode(text))


def test_bad_input(tmp_path):
    with pytest.raises(ValueError, match="no non-empty text"):
        train_sentencepiece(["", "  \n"], str(tmp_path / "x.model"), CONFIG)
    with pytest.raises(ValueError, match="SentencePiece training failed"):
        train_sentencepiece(["tiny text"], str(tmp_path / "x.model"), BPEConfig(vocab_size=100_000))
    assert not os.listdir(tmp_path)


def test_train_inputs_from_files(tmp_path, udhr_sample):
    (tmp_path / "a.txt").write_text(udhr_sample["eng"] * 3)
    with open(tmp_path / "b.jsonl", "w", encoding="utf-8") as f:
        for lang in ("deu_1996", "rus", "vie"):
            f.write(json.dumps({"text": udhr_sample[lang]}) + "\n")
    models = train_inputs(
        [f"{tmp_path}/*.*"], f"{tmp_path}/out/bpe.model", BPEConfig(vocab_size=500), load_demo_documents
    )
    assert models == {"all": (f"{tmp_path}/out/bpe.model", 4)}
    tokenizer = load_tokenizer(f"sentencepiece:{tmp_path}/out/bpe.model")
    assert (tokenizer.vocab_size, tokenizer.bod_id, tokenizer.eod_id, tokenizer.pad_id) == (500, 1, 2, 3)

    # Without the suffix, the model still lands at a `.model` path (the one the help and README use).
    models = train_inputs(
        [f"{tmp_path}/a.txt"], f"{tmp_path}/bare", BPEConfig(vocab_size=300), load_demo_documents
    )
    assert models == {"all": (f"{tmp_path}/bare.model", 1)} and not (tmp_path / "bare").exists()
    assert load_tokenizer(f"sentencepiece:{tmp_path}/bare.model").vocab_size == 300

    with pytest.raises(FileNotFoundError, match="matches no file"):
        train_inputs([f"{tmp_path}/missing*.txt"], f"{tmp_path}/x.model", CONFIG, load_demo_documents)
    assert not (tmp_path / "x.model").exists()


def test_train_inputs_per_named_subset(tmp_path, udhr_sample):
    (tmp_path / "en.txt").write_text(udhr_sample["eng"])
    (tmp_path / "ru.txt").write_text(udhr_sample["rus"])
    (tmp_path / "el.txt").write_text(udhr_sample["ell_monotonic"])
    inputs = [f"{tmp_path}/en.txt", f"other={tmp_path}/ru.txt", f"other={tmp_path}/el.txt"]
    models = train_inputs(
        inputs, str(tmp_path / "models"), BPEConfig(vocab_size=400), load_demo_documents, per_subset=True
    )
    assert models == {
        "en": (str(tmp_path / "models" / "en.model"), 1),
        "other": (str(tmp_path / "models" / "other.model"), 2),
    }
    assert sorted(os.listdir(tmp_path / "models")) == ["en.model", "other.model"]


def test_read_documents_of_each_input_kind(tmp_path):
    udhr = read_documents("demo:udhr", load_demo_documents)
    assert udhr == [d["text"] for d in load_demo_documents("train", ["udhr"])] and len(udhr) > 400
    assert len(read_documents("demo", load_demo_documents)) == len(load_demo_documents("train"))
    with pytest.raises(ValueError, match="unknown demo corpus sources"):
        read_documents("demo:wikipedia", load_demo_documents)
    (tmp_path / "raw.txt").write_bytes(b"gr\xfc\xdfe\n")
    assert read_documents(str(tmp_path / "raw.txt"), load_demo_documents) == ["gr\ufffd\ufffde\n"]
    (tmp_path / "bad.jsonl").write_text('{"text": "a"}\n\n{"body": "b"}\n')
    with pytest.raises(ValueError, match='bad.jsonl:3 has no "text" field'):
        read_documents(str(tmp_path / "bad.jsonl"), load_demo_documents)
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(ValueError, match="neither .txt nor .jsonl"):
        read_documents(str(tmp_path / "x.csv"), load_demo_documents)
    assert [subset_name(s) for s in ("data/web/*.jsonl", "demo:udhr", "a.txt", "*.txt")] == [
        "web",
        "demo_udhr",
        "a",
        "subset",
    ]
