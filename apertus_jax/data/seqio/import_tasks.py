"""seqio Tasks/Mixtures as pipeline components (component kind "seqio" in `apertus_jax.data.config`)::

    {"kind": "seqio", "task": "my_task", "split": "train", "feature": "targets"}

reads every example of the Task (a Mixture: each of its Tasks in turn; its rates are ignored, weights are
ours) once, in order, unshuffled and untrimmed, and keeps `feature`:
- text (a string feature such as "text" or "targets_pretokenized"): tokenized by our tokenizer to
  `[BoD] + ids + [EoD]`, like the raw kinds; invalid UTF-8 is replaced and counted;
- token ids: only from a feature whose vocabulary is a `TokenizerVocabulary` of the same tokenizer (ids
  of another vocabulary mean other text); framed with BoD/EoD where missing.
Empty documents are skipped. `score_field` names a numeric feature for "sorted" order. Needs the optional
extra "seqio" (`apertus_jax.data.seqio.vocabulary`).
"""

from __future__ import annotations

import logging

import numpy as np
import seqio

from apertus_jax.data import sources
from apertus_jax.data.documents import Component, tokenize_documents
from apertus_jax.data.seqio.vocabulary import TokenizerVocabulary


def _examples(task_or_mixture_name: str, split: str):
    provider = seqio.get_mixture_or_task(task_or_mixture_name)  # ValueError naming the unknown task
    for task in seqio.get_subtasks(provider):
        if split not in task.splits:
            raise ValueError(f"seqio task {task.name!r} has no split {split!r}; it has {list(task.splits)}")
        dataset = task.get_dataset(
            sequence_length=None, split=split, shuffle=False, num_epochs=1, trim_output_features=False
        )
        for index, example in enumerate(dataset.as_numpy_iterator()):
            yield task, index, example


def load_component(name: str, spec, tokenizer) -> Component:
    """A pipeline component read from a registered seqio Task or Mixture (see the module docstring).

    Args:
      name: the component name (for messages).
      spec: the component's `SeqioSpec` (`task`, `split`, `feature`, `score_field`).
      tokenizer: our tokenizer; text is tokenized with it, token ids must come from it.

    Returns:
      A `Component` of int32 documents `[BoD] + ids + [EoD]`.

    Raises:
      ValueError: an unknown task or split, a missing feature, ids of another vocabulary or outside
        `[0, vocab_size)`, no non-empty document.
    """
    task_name, feature = spec.task, spec.feature
    stats = sources.RawStats()
    texts, documents, scores = [], [], []
    for task, index, example in _examples(task_name, spec.split):
        if feature not in example:
            raise ValueError(
                f"component {name!r}: seqio task {task.name!r} has no feature {feature!r}; "
                f"it has {sorted(example)} (set 'feature')"
            )
        value = example[feature]
        score = float(example[spec.score_field]) if spec.score_field else None
        if isinstance(value, bytes):
            text = sources.decode_utf8(value, stats)
            if not text.strip():
                stats.skipped_empty += 1
                continue
            texts.append(text)
        else:
            ids = _framed_ids(name, task, feature, np.asarray(value), tokenizer, index)
            if ids is None:
                stats.skipped_empty += 1
                continue
            documents.append(ids)
        scores.append(score)
    if texts and documents:
        raise ValueError(f"component {name!r}: feature {feature!r} of {task_name!r} mixes text and token ids")
    if not texts and not documents:
        raise ValueError(
            f"component {name!r}: seqio {task_name!r} split {spec.split!r} has no non-empty {feature!r}"
        )
    if stats.replaced_invalid_utf8:
        logging.warning(
            "component %r: replaced %d invalid UTF-8 bytes by U+FFFD", name, stats.replaced_invalid_utf8
        )
    if texts:
        return tokenize_documents(name, texts, scores, tokenizer)
    score_array = np.array([np.nan if s is None else s for s in scores], np.float64)
    return Component(name, documents, float(np.mean([len(d) for d in documents])), score_array)


def _framed_ids(name: str, task, feature: str, ids: np.ndarray, tokenizer, index: int) -> np.ndarray | None:
    """`ids` with BoD/EoD added where missing, after checking they are ours; None for an empty one."""
    output_feature = task.output_features.get(feature)
    vocabulary = getattr(output_feature, "vocabulary", None)
    if vocabulary != TokenizerVocabulary(tokenizer):
        raise ValueError(
            f"component {name!r}: feature {feature!r} of seqio task {task.name!r} holds ids of {vocabulary}, "
            f"not of tokenizer {tokenizer.name!r}; read a text feature (e.g. 'targets_pretokenized') instead"
        )
    if ids.ndim != 1:
        raise ValueError(
            f"component {name!r}: feature {feature!r} of {task.name!r} has shape {ids.shape}, "
            "expected one sequence of ids per example"
        )
    ids = ids.astype(np.int32)
    if ids.size and (ids.min() < 0 or ids.max() >= tokenizer.vocab_size):
        raise ValueError(
            f"component {name!r}: example {index} of {task.name!r} has token id "
            f"{int(ids.max() if ids.max() >= tokenizer.vocab_size else ids.min())} outside "
            f"[0, {tokenizer.vocab_size})"
        )
    body = ids[1 if ids.size and ids[0] == tokenizer.bod_id else 0 :]
    body = body[:-1] if body.size and body[-1] == tokenizer.eod_id else body
    if not body.size:
        return None
    return np.concatenate([[tokenizer.bod_id], body, [tokenizer.eod_id]]).astype(np.int32)
