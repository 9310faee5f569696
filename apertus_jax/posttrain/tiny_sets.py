"""The tiny post-training sets of `apertus_jax/posttrain/assets/`, built from `qa_source.json`
(docs/posttrain.md).

`chat_tiny.jsonl` (SFT): every question with its reference answer as a one-turn conversation, then the German
and English question of each article as a two-turn conversation, every third one with a system message.
`qrpo_tiny.jsonl` (QRPO/DPO): every question with its candidate completions and the reference completions;
rewards are word-level ROUGE-L F1 against the reference answer (`apertus_jax.posttrain.rewards`).
CLI: `python -m experiments.build_posttrain_data`.
"""

import json
import os

from apertus_jax import files
from apertus_jax.posttrain.rewards import rouge_l_reward

ASSETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "assets")
SYSTEM = "Antworte kurz und genau. Answer briefly and precisely."


def conversations(items: list[dict]) -> list[dict]:
    """The chat set's lines (module docstring) of the `qa_source.json` items."""
    turn = lambda item: [
        {"role": "user", "content": item["question"]},
        {"role": "assistant", "content": item["answer"]},
    ]
    lines = [{"messages": turn(item)} for item in items]
    for index in range(0, len(items) - 1, 2):
        system = [{"role": "system", "content": SYSTEM}] if index % 3 == 0 else []
        lines.append({"messages": system + turn(items[index]) + turn(items[index + 1])})
    return lines


def preference_records(items: list[dict]) -> list[dict]:
    """The QRPO set's lines (module docstring) of the `qa_source.json` items."""
    return [
        {
            "prompt": item["question"],
            "completions": [
                {"text": c, "reward": rouge_l_reward(item["answer"], c)} for c in item["candidates"]
            ],
            "reference_rewards": [rouge_l_reward(item["answer"], c) for c in item["reference_completions"]],
        }
        for item in items
    ]


def write_tiny_sets(assets: str = ASSETS) -> list[str]:
    """Writes `chat_tiny.jsonl` and `qrpo_tiny.jsonl` (atomically) from `<assets>/qa_source.json`.

    Returns:
      The paths written.
    Raises:
      OSError: `qa_source.json` cannot be read or `assets` written.
    """
    with open(os.path.join(assets, "qa_source.json"), encoding="utf-8") as f:
        items = json.load(f)
    written = []
    for name, lines in (
        ("chat_tiny.jsonl", conversations(items)),
        ("qrpo_tiny.jsonl", preference_records(items)),
    ):
        written.append(os.path.join(assets, name))
        files.write_text(written[-1], "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    return written
