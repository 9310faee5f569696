"""SentencePieceTokenizer: special ids read from the model, the pad fallback, models it refuses."""

import json

import pytest
import sentencepiece as spm

from apertus_jax.files import file_sha256
from apertus_jax.tokenizers.sentencepiece_model import SentencePieceTokenizer


def train(tmp_path, texts, name, **special_ids):
    """A small BPE model on real text with the given special ids (-1 = no such piece)."""
    prefix = str(tmp_path / name)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_prefix=prefix,
        vocab_size=900,
        model_type="bpe",
        character_coverage=1.0,
        byte_fallback=True,
        normalization_rule_name="identity",  # lossless, as apertus_jax.tokenizers.train trains
        remove_extra_whitespaces=False,
        minloglevel=2,
        **special_ids,
    )
    return prefix + ".model"


@pytest.fixture(name="texts", scope="module")
def fixture_texts(udhr_sample):
    return [line for text in udhr_sample.values() for line in text.split(". ")]


def test_special_ids_come_from_the_model(tmp_path, texts):
    path = train(tmp_path, texts, "own_layout", unk_id=0, bos_id=5, eos_id=6, pad_id=7)
    tokenizer = SentencePieceTokenizer(path)
    assert (tokenizer.bod_id, tokenizer.eod_id, tokenizer.pad_id) == (5, 6, 7)
    assert tokenizer.vocab_size == 900
    assert tokenizer.checksum == file_sha256(path)
    assert tokenizer.name == "sentencepiece:own_layout.model"


def test_model_without_pad_pads_with_eod(tmp_path, texts):
    path = train(tmp_path, texts, "no_pad", unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
    tokenizer = SentencePieceTokenizer(path)
    assert tokenizer.pad_id == tokenizer.eod_id == 2


def test_model_without_bos_is_refused(tmp_path, texts):
    path = train(tmp_path, texts, "no_bos", unk_id=0, bos_id=-1, eos_id=1, pad_id=2)
    with pytest.raises(ValueError, match=r"no bos/eos piece \(bos_id=-1, eos_id=1\)"):
        SentencePieceTokenizer(path)


def test_missing_file_names_the_training_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="experiments.train_tokenizer"):
        SentencePieceTokenizer(str(tmp_path / "absent.model"))


def test_batch_encoder_matches_single_encoder_and_round_trips(tmp_path, texts, udhr_sample):
    tokenizer = SentencePieceTokenizer(train(tmp_path, texts, "rt", unk_id=0, bos_id=1, eos_id=2, pad_id=3))
    documents = list(udhr_sample.values())
    batch = tokenizer.encode_batch(documents)
    assert batch == [tokenizer.encode(d) for d in documents]
    assert [tokenizer.decode(ids) for ids in batch] == documents


@pytest.mark.parametrize("name", ["text.jsonl", "folder"])
def test_a_file_that_is_no_model_is_one_line_naming_it_and_the_fix(name, tmp_path, udhr_sample):
    """Before: sentencepiece's RuntimeError "INTERNAL: could not parse ModelProto from ..." (a traceback)."""
    path = tmp_path / name
    if name == "folder":
        path.mkdir()
    else:
        path.write_text(json.dumps({"text": next(iter(udhr_sample.values()))}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError) as raised:
        SentencePieceTokenizer(str(path))
    assert str(raised.value) == (
        f"{path} is not a SentencePiece model file; pass a .model file as sentencepiece:PATH, or train one "
        "with `python -m experiments.train_tokenizer`"
    )
