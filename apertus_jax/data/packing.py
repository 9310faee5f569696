"""Packing a document stream into fixed-length rows of T + 1 tokens (Megatron/Apertus style).

Documents are concatenated and cut into rows of T + 1 tokens with a stride of T: row r holds stream
tokens [r*T, r*T + T], so the last token of one row is the first input of the next and every token is a
target exactly once. Documents longer than a row are split across rows, never dropped. (Grain's
`ConcatThenSplitIterDataset` cuts rows without that overlap, so the first token of every row would never
be a target; hence this small packer.)

The packer's state is the position of the next row's first token, `(stream index, offset)`, in the
parent `MapDataset` of `(component, document index)` pairs, plus per-component document counts and target
token counts (`tokens_consumed`: tokens at row positions 1..T, i.e. every stream token but the first): restoring it
continues exactly mid-document, mid-epoch and mid-stage. At the end of a finite stream the last partial
row is padded with `pad_id` (segment 0, never a target) and iteration stops.

`history(n)` gives the n tokens of the last row's first document that precede the row's first target, so
a content-only Goldfish hash (`goldfish.goldfish_drop_mask(..., hash="mixed")`) sees a document cut by a
row boundary exactly as an uncut one.
"""

from __future__ import annotations

from typing import Any

import grain
import numpy as np


class PackedRows:
    """Iterator of packed rows, int32 `[seq_len + 1]`, over a stream of `(component, document index)`.

    Args:
      stream: a `grain.MapDataset` whose elements are `(component index, document index)`.
      documents: per component, random access to its documents (`documents[c][i]` -> int32 tokens [L]).
      seq_len: T, the number of inputs (and targets) per row.
      pad_id: the id that fills the last row of a finite stream.
    """

    def __init__(self, stream: grain.MapDataset, documents: list[Any], seq_len: int, pad_id: int):
        self.stream, self.documents = stream, documents
        self.seq_len = seq_len
        self.pad_id = pad_id
        self.document, self.offset = 0, 0
        self.documents_started = [0] * len(documents)  # per component, for exact epoch accounting
        self.tokens_consumed = [0] * len(documents)  # per component: tokens that became targets
        self._next_new_document = 0  # documents below this index are counted already
        self._exhausted = False
        self._cache: tuple[int, int, np.ndarray] | None = None
        self._row_start = (0, 0)  # (stream index, offset) of the last row's first token

    def _fetch(self, index: int) -> tuple[int, np.ndarray] | None:
        if index >= len(self.stream):
            return None
        if self._cache is None or self._cache[0] != index:
            component, document = self.stream[index]
            self._cache = (index, component, self.documents[component][document])
        return self._cache[1], self._cache[2]

    def __iter__(self) -> PackedRows:
        return self

    def __next__(self) -> np.ndarray:
        if self._exhausted:
            raise StopIteration
        row_length = self.seq_len + 1
        pieces, taken = [], 0
        document, offset = self.document, self.offset
        self._row_start = (document, offset)
        next_start = None
        while taken < row_length:
            fetched = self._fetch(document)
            if fetched is None:  # end of a finite stream
                if taken <= 1:  # only the overlap token left: nothing new to train on
                    raise StopIteration
                pieces.append(np.full(row_length - taken, self.pad_id, np.int32))
                self._exhausted = True
                break
            component, tokens = fetched
            if document >= self._next_new_document:
                self.documents_started[component] += 1
                self._next_new_document = document + 1
            count = min(len(tokens) - offset, row_length - taken)
            if next_start is None and taken + count > self.seq_len:
                next_start = (document, offset + self.seq_len - taken)
            # Row positions 1..T are targets; position 0 is the previous row's last target (or the stream's
            # first token, never a target), so each stream token is counted once.
            self.tokens_consumed[component] += count - (taken == 0)
            pieces.append(tokens[offset : offset + count])
            taken += count
            offset += count
            if offset == len(tokens):
                document, offset = document + 1, 0
        if next_start is not None:
            self.document, self.offset = next_start
        return np.concatenate(pieces).astype(np.int32, copy=False)

    def history(self, n: int) -> np.ndarray:
        """int64 `[n]`: the tokens of the last row's first document right before that row's first target
        (the row's first token is the last of them), -1 for places before the document's start.

        Only valid right after `__next__` returned a row; after `set_state` it refers to the restored row
        start, i.e. the next row."""
        history = np.full(n, -1, np.int64)
        fetched = self._fetch(self._row_start[0])
        if n == 0 or fetched is None:
            return history
        end = self._row_start[1] + 1
        tokens = fetched[1][max(0, end - n) : end]
        history[n - len(tokens) :] = tokens
        return history

    def get_state(self) -> dict[str, Any]:
        """JSON-serializable position of the next row and the per-component document counts."""
        return {
            "document": self.document,
            "offset": self.offset,
            "next_new_document": self._next_new_document,
            "documents_started": list(self.documents_started),
            "tokens_consumed": list(self.tokens_consumed),
            "exhausted": self._exhausted,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Continues from a `get_state()` result of a packer over the same documents."""
        self.document, self.offset = int(state["document"]), int(state["offset"])
        self._next_new_document = int(state["next_new_document"])
        self.documents_started = [int(n) for n in state["documents_started"]]
        # States saved before token accounting existed restore with zero counts.
        self.tokens_consumed = [int(n) for n in state.get("tokens_consumed", [0] * len(self.documents))]
        self._exhausted = bool(state["exhausted"])
        self._cache = None
        self._row_start = (self.document, self.offset)
