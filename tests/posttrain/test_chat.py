"""The chat template: role token ids, exactly the assistant tokens trained, prompts for generation."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apertus_jax.posttrain import chat
from apertus_jax.posttrain.rows import pack_row

TWO_TURNS = [
    {"role": "system", "content": "Antworte kurz."},
    {"role": "user", "content": "Was sagt Artikel 1?"},
    {"role": "assistant", "content": "Alle Menschen sind frei."},
    {"role": "user", "content": "Und auf Englisch?"},
    {"role": "assistant", "content": "All human beings are born free."},
]


def test_role_ids_of_the_demo_tokenizer_are_the_spare_utf8_byte_pieces(tokenizer):
    ids = chat.role_token_ids(tokenizer)
    assert ids["system"] == (252, 253) and ids["assistant"] == (258, 259)
    # No UTF-8 text encodes to them: the demo corpus's UDHR text in 440 languages never does.
    from apertus_jax.data.demo_corpus import load_demo_documents

    texts = [d["text"] for d in load_demo_documents("train", sources=["udhr"])[::10]]
    used = {i for ids in tokenizer.encode_batch(texts) for i in ids}
    assert len(used) > 1000 and used.isdisjoint(range(252, 260))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_no_text_encodes_to_a_role_id(tokenizer, text):
    assert set(tokenizer.encode(text)).isdisjoint(range(252, 260))


def test_role_ids_of_tekken():
    from apertus_jax.tokenizers.tekken import TekkenTokenizer

    ids = chat.role_token_ids(TekkenTokenizer())
    assert ids == {"system": (61, 62), "developer": (63, 64), "user": (65, 66), "assistant": (67, 68)}


def test_two_turn_example_trains_exactly_the_assistant_tokens(tokenizer):
    ids, trained = chat.render_conversation(TWO_TURNS, tokenizer)
    row = pack_row([(ids, trained)], seq_len=64, pad_id=tokenizer.pad_id)
    trained_targets = row["targets"][row["loss_mask"] == 1].tolist()
    end = 259  # <|assistant_end|> of the demo tokenizer
    expected = (
        tokenizer.encode("Alle Menschen sind frei.")
        + [end]
        + tokenizer.encode("All human beings are born free.")
        + [end]
    )
    assert trained_targets == expected
    # Every other target (role tokens, system and user text, </s>, padding) is masked.
    assert int(row["loss_mask"].sum()) == len(expected)
    assert chat.decode_reply(trained_targets, tokenizer) == "Alle Menschen sind frei."
    assert ids[0] == tokenizer.bod_id and ids[-1] == tokenizer.eod_id


def test_prompt_is_the_conversation_prefix_ending_in_assistant_start(tokenizer):
    full, _ = chat.render_conversation(TWO_TURNS, tokenizer)
    prompt = chat.render_prompt(TWO_TURNS[:4], tokenizer)
    assert prompt[-1] == 258
    assert full[: len(prompt)].tolist() == prompt.tolist()
    completion = chat.render_completion(TWO_TURNS[4]["content"], tokenizer)
    assert np.r_[prompt, completion].tolist() == full.tolist()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(chat.ROLES), st.text(max_size=20)), min_size=1, max_size=5))
def test_trained_tokens_are_the_assistant_contents_for_any_conversation(tokenizer, turns):
    messages = [{"role": r, "content": c} for r, c in turns]
    ids, trained = chat.render_conversation(messages, tokenizer)
    expected = [
        t for m in messages if m["role"] == "assistant" for t in tokenizer.encode(m["content"]) + [259]
    ]
    assert ids[trained].tolist() == expected
    assert len(ids) == 2 + sum(2 + len(tokenizer.encode(m["content"])) for m in messages)


def test_hf_tokenizer_without_role_tokens_is_refused():
    class Other:
        name = "hf:tokenizer.json"

    with pytest.raises(ValueError, match="tekken and SentencePiece"):
        chat.role_token_ids(Other())
