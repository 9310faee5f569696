"""`hf_export.hf_tokenizer`: the tokenizer.json of the demo SentencePiece BPE, tekken and an HF file encodes and
decodes every UDHR translation like the tokenizer itself; role names; refused conversions."""

import pytest
import sentencepiece as spm

from apertus_jax.data import demo_corpus
from apertus_jax.data.run_tokenizer import demo_tokenizer
from apertus_jax.posttrain import chat
from apertus_jax.tokenizers import load_tokenizer
from apertus_jax.tokenizers.hf_export import hf_tokenizer, special_token_names

from .test_hf import _byte_level_bpe


@pytest.fixture(name="tokenizer", scope="module", params=["demo", "tekken"])
def fixture_tokenizer(request):
    return demo_tokenizer(1024) if request.param == "demo" else load_tokenizer("tekken")


@pytest.mark.slow
def test_every_udhr_translation_encodes_and_decodes_alike(tokenizer):
    """The 521 whole translations (paragraphs, newlines, 439 languages, every script of the corpus)."""
    texts = list(demo_corpus.load_udhr().values())
    hf = hf_tokenizer(tokenizer)
    expected = tokenizer.encode_batch(texts)
    assert len(texts) == 521 and sum(map(len, expected)) > 1_000_000
    assert [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)] == expected
    assert hf.encode(texts[0]).ids == [tokenizer.bod_id, *expected[0]]  # the post-processor frames a document
    assert hf.decode_batch(expected) == [tokenizer.decode(ids) for ids in expected] == texts
    assert hf.get_vocab_size() == tokenizer.vocab_size
    assert special_token_names(tokenizer, hf) == {
        "bos_token": "<s>",
        "eos_token": "</s>",
        "pad_token": "<pad>",
        **({"unk_token": "<unk>"} if tokenizer.name != "tekken" else {}),
    }


@pytest.mark.slow
def test_role_names_take_the_spare_ids(tokenizer):
    names = chat.role_token_names(tokenizer)
    hf = hf_tokenizer(tokenizer, names)
    user_start, user_end = chat.role_token_ids(tokenizer)["user"]
    assert (hf.token_to_id("<|user_start|>"), hf.token_to_id("<|user_end|>")) == (user_start, user_end)
    question = "Was sagt Artikel 1 der Menschenrechtserklärung?"
    ids = hf.encode(f"<|user_start|>{question}<|user_end|>", add_special_tokens=False).ids
    assert ids == [user_start, *tokenizer.encode(question), user_end]
    assert hf.decode(ids) == tokenizer.decode(tokenizer.encode(question)) == question


def test_an_hf_file_is_kept_with_its_names(tmp_path):
    texts = [demo_corpus.load_udhr()[code] for code in ("eng", "deu_1996", "rus")]
    path = _byte_level_bpe(tmp_path / "tokenizer.json", texts, ["<unk>", "<s>", "</s>", "<pad>"])
    tokenizer = load_tokenizer(f"hf:{path}")
    hf = hf_tokenizer(tokenizer)
    assert hf.encode(texts[2]).ids == [1, *tokenizer.encode(texts[2])]
    assert hf.decode(tokenizer.encode(texts[1])) == texts[1]
    with pytest.raises(ValueError, match="keeps its own token names; cannot rename ids \\[5\\]"):
        hf_tokenizer(tokenizer, {5: "<|user_start|>"})


@pytest.mark.slow
def test_names_that_cannot_be_given_are_refused():
    tokenizer = demo_tokenizer(1024)
    normal = tokenizer.encode("Menschen")[0]
    with pytest.raises(ValueError, match=f"ids \\[{normal}\\] are not control ids"):
        hf_tokenizer(tokenizer, {normal: "<|user_start|>"})
    piece = hf_tokenizer(tokenizer).id_to_token(normal)
    with pytest.raises(ValueError, match="are already tokens of the vocabulary"):
        hf_tokenizer(tokenizer, {256: piece})
    with pytest.raises(ValueError, match="ids \\[1000\\] are not control ids"):
        hf_tokenizer(load_tokenizer("tekken"), {1000: "<|user_start|>"})


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"model_type": "unigram"}, "only BPE models with the whitespace as prefix are converted"),
        ({"normalization_rule_name": "nmt_nfkc"}, "only identity normalization without whitespace removal"),
    ],
)
def test_sentencepiece_models_it_cannot_reproduce_are_refused(settings, message, tmp_path):
    texts = [demo_corpus.load_udhr()[code] for code in ("eng", "deu_1996", "fra")]
    path = tmp_path / "other.model"
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([line for text in texts for line in text.splitlines() if line.strip()]),
        model_prefix=str(path.with_suffix("")),
        vocab_size=400,
        byte_fallback=True,
        minloglevel=2,
        **{"model_type": "bpe", "normalization_rule_name": "identity", **settings},
    )
    with pytest.raises(ValueError, match=message) as error:
        hf_tokenizer(load_tokenizer(f"sentencepiece:{path}"))
    assert "\n" not in str(error.value)
