"""Writes the tiny post-training sets from `apertus_jax/posttrain/assets/qa_source.json`.

    python -m experiments.build_posttrain_data

`chat_tiny.jsonl` (SFT): every question with its reference answer as a one-turn conversation, then the German
and English question of each article as a two-turn conversation, every third one with a system message.
`qrpo_tiny.jsonl` (QRPO/DPO): every question with its candidate completions and the reference completions;
rewards are word-level ROUGE-L F1 against the reference answer (`apertus_jax.posttrain.rewards`).
"""

import json
import os

from absl import app

from apertus_jax.posttrain.rewards import rouge_l_reward

ASSETS = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "apertus_jax", "posttrain", "assets"
)
SYSTEM = "Antworte kurz und genau. Answer briefly and precisely."


def conversations(items: list[dict]) -> list[dict]:
    """The chat set's lines (see the module docstring)."""
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
    """The QRPO set's lines (see the module docstring)."""
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


def write_jsonl(path: str, lines: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")


def main(argv) -> None:
    del argv
    with open(os.path.join(ASSETS, "qa_source.json"), encoding="utf-8") as f:
        items = json.load(f)
    write_jsonl(os.path.join(ASSETS, "chat_tiny.jsonl"), conversations(items))
    write_jsonl(os.path.join(ASSETS, "qrpo_tiny.jsonl"), preference_records(items))
    print(f"wrote chat_tiny.jsonl and qrpo_tiny.jsonl to {ASSETS}")


if __name__ == "__main__":
    app.run(main)
