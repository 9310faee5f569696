"""The QRPO / DPO batch iterator over preference records (prompt, candidate completions with rewards).

Examples, in file order (`completion_examples`): every candidate completion of every record, rendered as
`render_prompt(prompt) + render_completion(text)` with only the completion's tokens (content and
`<|assistant_end|>`) trained, and its quantile reward among the record's reference rewards.

- QRPO: one row per completion (slot 0).
- DPO: one row per record, the highest-reward completion (slot 0, chosen) and the lowest (slot 1, rejected),
  first ones on ties. A record whose completions all have the same reward has no pair: a counted skip
  (logged, `PreferencePipeline.skipped`).

Rows come in a per-epoch shuffled order (seeded), epoch after epoch; shard p of P takes rows p, p + P, ...
Besides the trainer arrays, batches carry float32 `[B, 2]` `quantile_reward` and `ref_logprobs` (log pi_ref of
each slot's completion, from the cache of `reference.write_cache` or scored on the fly).

Bad input: the `inputs` rules, and a row longer than `data.seq_len` positions, fail with `PATH:LINE: problem`.
"""

import logging
from collections.abc import Callable, Sequence

import numpy as np

from apertus_jax.posttrain import chat, epochs, inputs, rows
from apertus_jax.posttrain.objectives import SLOTS, quantile_reward
from apertus_jax.tokenizers.base import Tokenizer

STATE_VERSION = 1
MODES = ("qrpo", "dpo")


def completion_examples(paths: Sequence[str], tokenizer: Tokenizer) -> list[dict]:
    """Every candidate completion of the files, in order: dicts with `where` ("PATH:LINE"), `record` (its
    record's index), `ids` int32 [L], `trained` bool [L], `reward`, `quantile_reward`.

    Raises:
      ValueError: `PATH:LINE: problem` (inputs rules); no records. FileNotFoundError: a missing file.
    """
    examples, record = [], 0
    for path in paths:
        for where, obj in inputs.read_jsonl(path):
            parsed = inputs.parse_preference(obj, where)
            prompt = chat.render_prompt(parsed["prompt"], tokenizer)
            texts = [text for text, _ in parsed["completions"]]
            rewards = np.array([reward for _, reward in parsed["completions"]])
            quantiles = quantile_reward(
                rewards,
                np.broadcast_to(
                    parsed["reference_rewards"], (len(rewards), len(parsed["reference_rewards"]))
                ),
            )
            for text, reward, quantile in zip(texts, rewards, quantiles):
                completion = chat.render_completion(text, tokenizer)
                trained = np.r_[np.zeros(len(prompt), bool), np.ones(len(completion) - 1, bool), False]
                examples.append(
                    {
                        "where": where,
                        "record": record,
                        "ids": np.r_[prompt, completion].astype(np.int32),
                        "trained": trained,
                        "reward": float(reward),
                        "quantile_reward": float(quantile),
                    }
                )
            record += 1
    if not examples:
        raise ValueError(f"no preference records in {list(paths)}")
    return examples


def training_rows(examples: list[dict], mode: str, seq_len: int) -> tuple[list[tuple[int, ...]], int]:
    """The rows of `mode` as tuples of example indices (QRPO: (k,); DPO: (chosen, rejected)) and the
    number of records skipped (DPO: no reward difference).

    Raises:
      ValueError: `PATH:LINE: ... exceeds a row` for a row longer than seq_len positions.
    """
    if mode == "qrpo":
        groups = [(k,) for k in range(len(examples))]
        skipped = 0
    else:
        by_record: dict[int, list[int]] = {}
        for k, example in enumerate(examples):
            by_record.setdefault(example["record"], []).append(k)
        groups, skipped = [], 0
        for members in by_record.values():
            rewards = [examples[k]["reward"] for k in members]
            if max(rewards) == min(rewards):
                skipped += 1
                continue
            groups.append((members[int(np.argmax(rewards))], members[int(np.argmin(rewards))]))
    for group in groups:
        needed = sum(rows.positions_needed(examples[k]["ids"]) for k in group)
        if needed > seq_len:
            raise ValueError(
                f"{examples[group[0]]['where']}: a {mode} row of {needed} positions exceeds data.seq_len = "
                f"{seq_len}; shorten the prompt or completions or raise data.seq_len"
            )
    return groups, skipped


class PreferencePipeline(epochs.EpochIterator):
    """Batches of QRPO or DPO rows (see the module docstring).

    Args:
      paths: preference JSONL files. tokenizer: the run's tokenizer. mode: "qrpo" or "dpo".
      seq_len, batch_size, process_index, process_count, seed: as `sft_data.ChatPipeline`.
      make_reference: examples -> `ref(batch, groups) -> float32 [B, 2]`, log pi_ref of each slot
        (`reference.cached_reference` / `on_the_fly_reference`).

    Raises:
      ValueError: bad input (see the module docstring); a shard without rows.
    """

    STATE_MISMATCH = (
        "preference data iterator state was saved with other records, tokenizer, objective, seq_len, "
        "seed or data shards; resume with the same settings"
    )

    def __init__(
        self,
        paths,
        tokenizer,
        *,
        mode,
        seq_len,
        batch_size,
        process_index,
        process_count,
        seed,
        make_reference: Callable,
    ):
        super().__init__(seed)
        self.examples = completion_examples(paths, tokenizer)
        groups, self.skipped = training_rows(self.examples, mode, seq_len)
        if self.skipped:
            logging.warning(
                "dpo: skipped %d records whose completions all have the same reward", self.skipped
            )
        self.groups = groups[process_index::process_count]
        if not self.groups:
            raise ValueError(f"{len(groups)} {mode} rows do not fill {process_count} data shards")
        self.tokenizer, self.seq_len, self.batch_size = tokenizer, seq_len, batch_size
        self.process_count, self.reference = process_count, make_reference(self.examples)
        self.fingerprint = epochs.inputs_fingerprint(
            paths, tokenizer, mode, seq_len, seed, process_index, process_count
        )

    def row(self, group: tuple[int, ...]) -> dict[str, np.ndarray]:
        """The trainer row of a group of example indices, with its `quantile_reward` [2]."""
        row = rows.pack_row(
            [(self.examples[k]["ids"], self.examples[k]["trained"]) for k in group],
            self.seq_len,
            self.tokenizer.pad_id,
        )
        row["quantile_reward"] = np.zeros(SLOTS, np.float32)
        row["quantile_reward"][: len(group)] = [self.examples[k]["quantile_reward"] for k in group]
        return row

    def __next__(self) -> dict[str, np.ndarray]:
        groups = []
        n = len(self.groups)
        for _ in range(epochs.rows_per_step(self.batch_size, self.seq_len, self.step) // self.process_count):
            groups.append(self.groups[self.order(n)[self.position]])
            self.advance(n)
        batch = rows.stack_rows([self.row(g) for g in groups])
        batch["ref_logprobs"] = self.reference(batch, groups)
        self.step += 1
        return self.count(batch)
