"""What a data strategy feeds the model, read from the training pipeline itself (Boldt, docs/recipe.md 8).

`strategy_report(pipeline, tokenizer, seq_len=, rows=, steps=)` runs the real `TrainIterator` for `steps`
batches and reads, per stage, the `(component, document)` pairs its packer consumed (the documents of every
row, the partial last one included). It reports unique tokens (distinct documents by content: a document in
two subsets counts once), passes over each component, and the order of components (and of the documents'
scores) over training.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from apertus_jax.data.config import PipelineSpec
from apertus_jax.data.mixture import host_documents
from apertus_jax.data.pipeline import TrainIterator


def consumed_documents(
    pipeline: PipelineSpec, tokenizer, *, seq_len: int, rows: int, steps: int, seed: int = 0
):
    """`(iterator, [(stage name, component index, document index), ...])` of the first `steps` batches of
    `rows` rows, in training order.

    Raises:
      ValueError / FileNotFoundError: as `TrainIterator`; a stage that runs out of documents.
    """
    iterator = TrainIterator(
        pipeline, tokenizer, seq_len=seq_len, batch_size=rows, process_index=0, process_count=1, seed=seed
    )
    packers = {}
    for _ in range(steps):
        next(iterator)
        packers[iterator.stage] = iterator.packer
    sequence = []
    for stage, packer in sorted(packers.items()):
        name = iterator.pipeline.stages[stage].name
        last = min(packer.document, len(packer.stream) - 1)
        sequence += [(name, *packer.stream[i]) for i in range(last + 1)]
    return iterator, sequence


def strategy_report(
    pipeline: PipelineSpec, tokenizer, *, seq_len: int, rows: int, steps: int, seed: int = 0
) -> dict[str, Any]:
    """The data a strategy trains on in `steps` batches of `rows` x `seq_len` tokens.

    Returns:
      `{"tokens": trained tokens, "unique_tokens": tokens of the distinct documents consumed,
      "components": {name: {"documents": documents the strategy draws from (after `take`), "tokens": their
      tokens, "draws":
      documents consumed, "distinct": distinct documents consumed, "epochs": draws / documents}},
      "order": [[stage, component, documents in a row], ...] (runs of the same component),
      "scores": the component scores of the consumed documents in order (NaN without scores)}`.
    """
    iterator, sequence = consumed_documents(
        pipeline, tokenizer, seq_len=seq_len, rows=rows, steps=steps, seed=seed
    )
    components = iterator.components
    seen, unique_tokens = set(), 0
    per_component = {}
    for c in components:
        available = host_documents(
            c,
            iterator.pipeline.components[c.name],
            split_seed=iterator.pipeline.split_seed,
            process_index=0,
            process_count=1,
        )
        per_component[c.name] = {
            "documents": len(available),
            "tokens": int(sum(len(c.documents[i]) for i in available)),
            "draws": 0,
            "distinct": set(),
        }
    order: list[list] = []
    scores = []
    for stage, component_index, document_index in sequence:
        component = components[component_index]
        tokens = component.documents[document_index]
        key = hashlib.sha256(np.asarray(tokens, np.int32).tobytes()).digest()
        if key not in seen:
            seen.add(key)
            unique_tokens += len(tokens)
        entry = per_component[component.name]
        entry["draws"] += 1
        entry["distinct"].add(document_index)
        if order and order[-1][:2] == [stage, component.name]:
            order[-1][2] += 1
        else:
            order.append([stage, component.name, 1])
        has_scores = component.scores is not None and len(component.scores)
        scores.append(float(component.scores[document_index]) if has_scores else float("nan"))
    for entry in per_component.values():
        entry["distinct"] = len(entry["distinct"])
        entry["epochs"] = entry["draws"] / entry["documents"]
    return {
        "tokens": steps * rows * seq_len,
        "unique_tokens": unique_tokens,
        "components": per_component,
        "order": order,
        "scores": scores,
    }
