"""HF tokenizer.json files: special ids from special added tokens, documented fallbacks, round trips."""

import pytest
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import decoders, models, pre_tokenizers, trainers

from apertus_jax.tokenizers import load_tokenizer
from apertus_jax.tokenizers.hf import HFTokenizer


def _byte_level_bpe(path, texts, special_tokens, plain_tokens=()):
    """A tiny byte-level BPE tokenizer.json (Llama-3/Qwen style), trained on `texts`."""
    tokenizer = tokenizers.Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=special_tokens, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.add_tokens(list(plain_tokens))
    tokenizer.save(str(path))
    return str(path)


def test_specials_and_round_trip(tmp_path, udhr_sample):
    path = _byte_level_bpe(
        tmp_path / "tokenizer.json",
        udhr_sample.values(),
        ["<unk>", "<|begin_of_text|>", "<|end_of_text|>", "<pad>"],
    )
    tokenizer = load_tokenizer(f"hf:{path}")
    assert (tokenizer.bod_id, tokenizer.eod_id, tokenizer.pad_id) == (1, 2, 3)
    assert tokenizer.vocab_size == 400
    assert tokenizer.name == f"hf:{tmp_path.name}/tokenizer.json"
    texts = list(udhr_sample.values())
    for text, ids in zip(texts, tokenizer.encode_batch(texts)):
        assert ids == tokenizer.encode(text)
        assert tokenizer.decode(ids) == text
        document = tokenizer.encode_document(text)
        assert document[0] == 1 and document[-1] == 2
        assert tokenizer.decode(document) == text


@pytest.fixture(name="byte_level", scope="module")
def fixture_byte_level(tmp_path_factory, udhr_sample):
    path = _byte_level_bpe(tmp_path_factory.mktemp("hf") / "tokenizer.json", udhr_sample.values(), ["</s>"])
    return load_tokenizer(f"hf:{path}")


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_round_trip_any_text(byte_level, text):
    assert byte_level.decode(byte_level.encode(text)) == text


def test_fallbacks(tmp_path, udhr_sample):
    # Qwen-like: only <|endoftext|> is special; a non-special "<s>" token must not become BoD.
    path = _byte_level_bpe(
        tmp_path / "tokenizer.json", udhr_sample.values(), ["<|endoftext|>"], plain_tokens=["<s>"]
    )
    tokenizer = HFTokenizer(path)
    assert tokenizer.eod_id == 0
    assert tokenizer.bod_id == tokenizer.eod_id and tokenizer.pad_id == tokenizer.eod_id
    explicit = HFTokenizer(path, bod_token="<s>", name="toy")
    assert explicit.bod_id == 400 and explicit.name == "toy"


def test_errors(tmp_path, udhr_sample):
    path = _byte_level_bpe(tmp_path / "tokenizer.json", udhr_sample.values(), ["<unk>"])
    with pytest.raises(ValueError, match="none of the EoD tokens"):
        HFTokenizer(path)
    with pytest.raises(ValueError, match="not in HF tokenizer"):
        HFTokenizer(path, eod_token="<no-such-token>")


def test_a_folder_or_a_file_of_another_kind_is_one_value_error_naming_the_fix(tmp_path):
    """`hf:DIR` (an export's folder) and a JSON that is no tokenizer.json (its config.json): the `tokenizers`
    library's bare Exception ("Is a directory (os error 21)") became a ValueError, one line in every CLI."""
    (tmp_path / "config.json").write_text('{"model_type": "apertus"}')
    with pytest.raises(ValueError) as folder:
        load_tokenizer(f"hf:{tmp_path}")
    assert str(folder.value) == (
        f"HF tokenizer {tmp_path} is a directory; pass the path of its tokenizer.json "
        f"({tmp_path / 'tokenizer.json'})"
    )
    with pytest.raises(
        ValueError, match=r"^HF tokenizer .*config\.json is not a tokenizer\.json file \(.+\); "
    ):
        load_tokenizer(f"hf:{tmp_path / 'config.json'}")
