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
