"""The SFT batch iterator: chat conversations packed whole into rows, loss only on assistant tokens.

Every conversation of the JSONL files (`inputs`) is rendered with the chat template (`chat`), and rows are
filled greedily with whole conversations in a per-epoch shuffled order (seeded; each conversation its own
segment, `rows.pack_row`); a row that cannot take the next conversation is closed with padding. The
stream repeats epoch after epoch. Shard p of P takes conversations p, p + P, ...

Bad input fails before anything is trained, with one line `PATH:LINE: problem`: the `inputs` rules, and a
conversation longer than a row (`data.seq_len + 1` ids).

State (`get_state` / `set_state`, JSON; `epochs.EpochIterator`): step, epoch and the next conversation of the
epoch's order, plus a fingerprint of the inputs, so a restored iterator yields bitwise the batches an uninterrupted one would.
"""

from collections.abc import Sequence

import numpy as np

from apertus_jax.posttrain import chat, epochs, inputs, rows
from apertus_jax.tokenizers.base import Tokenizer

STATE_VERSION = 1


def load_conversations(
    paths: Sequence[str], tokenizer: Tokenizer, seq_len: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """`(ids, trained)` of every conversation of the files, in file order.

    Raises:
      ValueError: `PATH:LINE: problem` (inputs rules; a conversation of more than seq_len + 1 ids);
        no conversation at all. FileNotFoundError: a missing file.
    """
    conversations = []
    for path in paths:
        for where, obj in inputs.read_jsonl(path):
            ids, trained = chat.render_conversation(inputs.parse_conversation(obj, where), tokenizer)
            if rows.positions_needed(ids) > seq_len:
                raise ValueError(
                    f"{where}: conversation of {len(ids)} tokens exceeds a row of data.seq_len + 1 = "
                    f"{seq_len + 1}; shorten it or raise data.seq_len"
                )
            conversations.append((ids, trained))
    if not conversations:
        raise ValueError(f"no conversations in {list(paths)}")
    return conversations


class ChatPipeline(epochs.EpochIterator):
    """Batches of packed conversations: dict of int32 `[B / process_count, T]` trainer arrays.

    Args:
      paths: conversation JSONL files. tokenizer: the run's tokenizer (with role token ids).
      seq_len: T. batch_size: global rows per step (int or `BatchSizePlan`).
      process_index, process_count: this shard and the number of shards. seed: the order's seed.

    Raises:
      ValueError: bad input (see the module docstring); a shard without conversations.
    """

    STATE_MISMATCH = (
        "chat data iterator state was saved with other conversations, tokenizer, seq_len, seed or "
        "data shards; resume with the same settings"
    )

    def __init__(self, paths, tokenizer, *, seq_len, batch_size, process_index, process_count, seed):
        super().__init__(seed)
        conversations = load_conversations(paths, tokenizer, seq_len)
        self.conversations = conversations[process_index::process_count]
        if not self.conversations:
            raise ValueError(
                f"{len(conversations)} conversations do not fill {process_count} data shards; "
                "add conversations or lower data.num_shards"
            )
        self.tokenizer, self.seq_len, self.batch_size = tokenizer, seq_len, batch_size
        self.process_count = process_count
        self.fingerprint = epochs.inputs_fingerprint(
            paths, tokenizer, seq_len, seed, process_index, process_count
        )

    def _next_row(self) -> dict[str, np.ndarray]:
        n = len(self.conversations)
        order, taken, used, epoch = self.order(n), [], 0, self.epoch
        while self.epoch == epoch:
            ids, trained = self.conversations[order[self.position]]
            if used + rows.positions_needed(ids) > self.seq_len:
                break
            taken.append((ids, trained))
            used += rows.positions_needed(ids)
            self.advance(n)
        return rows.pack_row(taken, self.seq_len, self.tokenizer.pad_id)

    def __next__(self) -> dict[str, np.ndarray]:
        global_rows = epochs.rows_per_step(self.batch_size, self.seq_len, self.step)
        batch = rows.stack_rows([self._next_row() for _ in range(global_rows // self.process_count)])
        self.step += 1
        return self.count(batch)
