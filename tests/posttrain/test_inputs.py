"""Post-training JSONL records: one-line errors naming the file and line."""

import pytest

from apertus_jax.posttrain import inputs


def _first_error(path, parse):
    for where, obj in inputs.read_jsonl(path):
        parse(obj, where)


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ({"messages": []}, "empty conversation"),
        ({"messages": [{"role": "robot", "content": "Hallo"}]}, "unknown role 'robot'"),
        ({"messages": [{"role": "user"}]}, "string 'content'"),
        ({"messages": [{"role": "user", "content": "Hallo"}]}, "without an assistant message"),
    ],
    ids=["bad-json", "not-object", "empty", "unknown-role", "no-content", "no-assistant"],
)
def test_bad_conversation_names_the_line(write_jsonl, line, message):
    good = {
        "messages": [{"role": "user", "content": "Hallo"}, {"role": "assistant", "content": "Guten Tag."}]
    }
    path = write_jsonl([good, "", good, line])
    with pytest.raises(ValueError, match=f"^{path}:4: .*{message}") as error:
        _first_error(path, inputs.parse_conversation)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    "record, message",
    [
        (
            {"prompt": "", "completions": [{"text": "a", "reward": 1}], "reference_rewards": [0]},
            "empty conversation",
        ),
        ({"prompt": "Frage", "completions": [], "reference_rewards": [0]}, "'completions' must be"),
        (
            {"prompt": "Frage", "completions": [{"text": "a", "reward": "hoch"}], "reference_rewards": [0]},
            "reward must be a finite",
        ),
        (
            {"prompt": "Frage", "completions": [{"text": "a", "reward": 1}], "reference_rewards": []},
            "'reference_rewards'",
        ),
        (
            {"prompt": [{"role": "moderator", "content": "x"}], "completions": [], "reference_rewards": [1]},
            "unknown role",
        ),
    ],
    ids=["empty-prompt", "no-completions", "bad-reward", "no-references", "unknown-role"],
)
def test_bad_preference_record_names_the_line(write_jsonl, record, message):
    path = write_jsonl([record])
    with pytest.raises(ValueError, match=f"^{path}:1: .*{message}"):
        _first_error(path, inputs.parse_preference)


def test_string_prompt_is_one_user_message(write_jsonl):
    record = {
        "prompt": "Was sagt Artikel 3?",
        "completions": [{"text": "Leben.", "reward": 0.5}],
        "reference_rewards": [0.1, 0.9],
    }
    parsed = inputs.parse_preference(record, "x:1")
    assert parsed == {
        "prompt": [{"role": "user", "content": "Was sagt Artikel 3?"}],
        "completions": [("Leben.", 0.5)],
        "reference_rewards": [0.1, 0.9],
    }


def test_a_line_of_the_other_kind_says_what_was_expected_and_found(write_jsonl, tmp_path):
    """The preference file given to SFT, the chat file to QRPO: before, both were `empty conversation`."""
    conversation = {
        "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    }
    preference = {"prompt": "Hi", "completions": [{"text": "Hello", "reward": 1}], "reference_rewards": [0]}
    with pytest.raises(ValueError) as sft:
        _first_error(write_jsonl([preference]), inputs.parse_conversation)
    assert str(sft.value).endswith(
        ":1: expected a conversation {'messages': [...]} (SFT), found a preference record: use experiments.qrpo"
    )
    with pytest.raises(ValueError) as qrpo:
        _first_error(write_jsonl([conversation]), inputs.parse_preference)
    assert str(qrpo.value).endswith(
        ":1: expected a preference record {'prompt', 'completions', 'reference_rewards'} (QRPO, DPO), found a "
        "conversation: use experiments.sft"
    )
    with pytest.raises(ValueError, match=r":1: expected a conversation .*, found keys \['text'\]$"):
        _first_error(write_jsonl([{"text": "plain"}]), inputs.parse_conversation)
    with pytest.raises(FileNotFoundError) as missing:
        next(inputs.read_jsonl(str(tmp_path / "nope.jsonl")))
    assert str(missing.value) == (
        f"posttrain.data: {tmp_path / 'nope.jsonl'} does not exist; set --config.posttrain.data to the JSONL "
        "files to train on"
    )
