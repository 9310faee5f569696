"""Post-training JSONL inputs, validated line by line: conversations (SFT) and preference records (QRPO/DPO).

Conversation line (SFT):

    {"messages": [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}, ...]}

Preference line (QRPO, DPO):

    {"prompt": [{"role": "user", "content": "..."}] or "...",     # a string is one user message
     "completions": [{"text": "...", "reward": 0.7}, ...],        # >= 1 candidates with their rewards
     "reference_rewards": [0.1, 0.4, ...]}                        # >= 1 rewards of reference completions

Every problem (bad JSON, an unknown role, an empty conversation or prompt, a conversation without an
assistant message, a non-numeric reward, ...) raises one `ValueError` line `PATH:LINE: problem`; a line of the
other kind (a preference record given to SFT, a conversation to QRPO/DPO) says which kind it is and which
command takes it. Blank lines are skipped; a missing file is one `FileNotFoundError` line naming
`posttrain.data`.
"""

import json
import math
from collections.abc import Iterator

from apertus_jax.posttrain.chat import ROLES


def read_jsonl(path: str) -> Iterator[tuple[str, dict]]:
    """Yields `("PATH:LINE", object)` for every non-blank line of a JSONL file.

    Raises:
      FileNotFoundError: `path` (a file of `posttrain.data`) does not exist. ValueError: a line that is not a
        JSON object.
    """
    try:
        f = open(path, encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(
            f"posttrain.data: {path} does not exist; set --config.posttrain.data to the JSONL files to train on"
        ) from None
    with f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{where}: not valid JSON ({error.msg})") from None
            if not isinstance(obj, dict):
                raise ValueError(f"{where}: expected a JSON object, got {type(obj).__name__}")
            yield where, obj


def parse_messages(messages, where: str) -> list[dict]:
    """Validated `[{"role", "content"}]` (roles in `chat.ROLES`, string contents).

    Raises:
      ValueError: `where: problem` for an empty or malformed list or an unknown role.
    """
    if not isinstance(messages, list) or not messages:
        raise ValueError(f"{where}: empty conversation; give a non-empty list of messages")
    parsed = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise ValueError(f"{where}: message {index} must be an object with a string 'content'")
        if message.get("role") not in ROLES:
            raise ValueError(
                f"{where}: message {index} has unknown role {message.get('role')!r}; use {ROLES}"
            )
        parsed.append({"role": message["role"], "content": message["content"]})
    return parsed


def parse_conversation(obj: dict, where: str) -> list[dict]:
    """The messages of a conversation line; it must hold an assistant message (else nothing is trained).

    Raises:
      ValueError: `where: problem`.
    """
    if "messages" not in obj:
        kind = "a preference record: use experiments.qrpo" if "completions" in obj else f"keys {sorted(obj)}"
        raise ValueError(f"{where}: expected a conversation {{'messages': [...]}} (SFT), found {kind}")
    messages = parse_messages(obj["messages"], where)
    if not any(m["role"] == "assistant" for m in messages):
        raise ValueError(f"{where}: conversation without an assistant message has nothing to train on")
    return messages


def _number(value, where: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{where}: {what} must be a finite number, got {value!r}")
    return float(value)


def parse_preference(obj: dict, where: str) -> dict:
    """`{"prompt": messages, "completions": [(text, reward)], "reference_rewards": [float]}` of a line.

    Raises:
      ValueError: `where: problem`.
    """
    if "prompt" not in obj:
        kind = "a conversation: use experiments.sft" if "messages" in obj else f"keys {sorted(obj)}"
        raise ValueError(
            f"{where}: expected a preference record {{'prompt', 'completions', 'reference_rewards'}} "
            f"(QRPO, DPO), found {kind}"
        )
    prompt = obj["prompt"]
    if isinstance(prompt, str):
        prompt = [{"role": "user", "content": prompt}] if prompt else []
    prompt = parse_messages(prompt, where)
    completions = obj.get("completions")
    if not isinstance(completions, list) or not completions:
        raise ValueError(f"{where}: 'completions' must be a non-empty list of {{'text', 'reward'}}")
    parsed = []
    for index, completion in enumerate(completions):
        if not isinstance(completion, dict) or not isinstance(completion.get("text"), str):
            raise ValueError(f"{where}: completion {index} must be an object with a string 'text'")
        parsed.append(
            (completion["text"], _number(completion.get("reward"), where, f"completion {index} reward"))
        )
    references = obj.get("reference_rewards")
    if not isinstance(references, list) or not references:
        raise ValueError(f"{where}: 'reference_rewards' must be a non-empty list of numbers")
    references = [_number(r, where, "a reference reward") for r in references]
    return {"prompt": prompt, "completions": parsed, "reference_rewards": references}
