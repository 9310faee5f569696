"""seqio interop: seqio Tasks/Mixtures as pipeline components, and our components as seqio Tasks.

Needs the optional extra `pip install "apertus_jax[seqio]"` (seqio pulls TensorFlow; keep it out of the
training environment). Both directions share one vocabulary, `TokenizerVocabulary`, a
`seqio.Vocabulary` around our `Tokenizer` (BoD = `bos_id`, EoD = `eos_id`, `pad_id` = the tokenizer's
pad; vocabularies are equal when the tokenizer checksums are).

Import (component kind "seqio" in `apertus_jax.data.config`)::

    {"kind": "seqio", "task": "my_task", "split": "train", "feature": "targets"}

reads every example of the Task (a Mixture: each of its Tasks in turn; its rates are ignored, weights are
ours) once, in order, unshuffled and untrimmed, and keeps `feature`:
- text (a string feature such as "text" or "targets_pretokenized"): tokenized by our tokenizer to
  `[BoD] + ids + [EoD]`, like the raw kinds; invalid UTF-8 is replaced and counted;
- token ids: only from a feature whose vocabulary is a `TokenizerVocabulary` of the same tokenizer (ids
  of another vocabulary mean other text); framed with BoD/EoD where missing.
Empty documents are skipped. `score_field` names a numeric feature for "sorted" order.

Export::

    names = register_seqio_tasks(data_config, tokenizer, prefix="apertus_")
    # names["tasks"]: component -> Task name, names["mixtures"]: stage -> Mixture name

registers one Task per component (`prefix + component`, split = the component's "split"), whose source
(a `seqio.FunctionDataSource`) yields the component's documents (after `take` and "sorted" order, all
hosts) as `targets` (EoD appended by `seqio.preprocessors.append_eos`, so `targets` equals the document
the pipeline packs) plus `targets_pretokenized` (the decoded text), and one Mixture per stage
(`prefix + stage + "_mixture"`). seqio rates count examples, our weights count tokens, so a Task's rate
is `weight / mean tokens per document`: the same document proportions `mixture.mix_components` draws.
Registering a name again replaces it. seqio's own feature converters pad with id 0, not `pad_id`.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

try:
    import seqio
    import tensorflow as tf
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f"apertus_jax.data.seqio_interop needs seqio ({error}); install the extra: "
        "pip install 'apertus_jax[seqio]' (in a separate environment: it pulls TensorFlow)"
    ) from error

from apertus_jax.data import mixture, sources
from apertus_jax.data.config import normalize_data_config


class TokenizerVocabulary(seqio.Vocabulary):
    """Our `Tokenizer` (`apertus_jax.tokenizers`) as a `seqio.Vocabulary`.

    `encode`/`decode` are the tokenizer's (no special tokens in, special tokens dropped out; seqio's
    `decode` stops after the first EoD); `encode_tf` takes a scalar string and returns int32 ids `[L]`,
    `decode_tf` takes int32 ids `[..., L]` and returns strings `[...]` (both run the tokenizer in
    `tf.py_function`, so they work in eager mode and in `tf.data` maps, not in exported graphs).
    """

    def __init__(self, tokenizer):
        super().__init__(extra_ids=0)
        self.tokenizer = tokenizer

    @property
    def bos_id(self) -> int:
        return self.tokenizer.bod_id

    @property
    def eos_id(self) -> int:
        return self.tokenizer.eod_id

    @property
    def pad_id(self) -> int:
        return self.tokenizer.pad_id

    @property
    def unk_id(self) -> None:
        return None

    @property
    def _base_vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    def _encode(self, s: str) -> list[int]:
        return self.tokenizer.encode(s)

    def _decode(self, ids) -> str:
        return self.tokenizer.decode([int(i) for i in ids])

    def _encode_tf(self, s: tf.Tensor) -> tf.Tensor:
        def encode(text):
            return np.asarray(self.tokenizer.encode(text.numpy().decode("utf-8")), np.int32)

        ids = tf.py_function(encode, [s], tf.int32)
        ids.set_shape([None])
        return ids

    def _decode_tf(self, ids: tf.Tensor) -> tf.Tensor:
        def decode(batch):
            array = batch.numpy()
            rows = array.reshape(-1, array.shape[-1])
            texts = [self.tokenizer.decode(row.tolist()).encode("utf-8") for row in rows]
            return np.asarray(texts, dtype=object).reshape(array.shape[:-1])

        text = tf.py_function(decode, [ids], tf.string)
        text.set_shape(ids.shape[:-1])
        return text

    def __eq__(self, other) -> bool:
        return isinstance(other, TokenizerVocabulary) and other.tokenizer.checksum == self.tokenizer.checksum

    def __str__(self) -> str:
        return f"TokenizerVocabulary({self.tokenizer.name}, vocab_size={self.tokenizer.vocab_size})"


# ---------------------------------------------------------------------------------------------- import


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


def load_component(name: str, spec: dict[str, Any], tokenizer) -> mixture.Component:
    """A pipeline component read from a registered seqio Task or Mixture (see the module docstring).

    Args:
      name: the component name (for messages).
      spec: a normalized component spec of kind "seqio" (`task`, `split`, `feature`, `score_field`).
      tokenizer: our tokenizer; text is tokenized with it, token ids must come from it.

    Returns:
      A `mixture.Component` of int32 documents `[BoD] + ids + [EoD]`.

    Raises:
      ValueError: an unknown task or split, a missing feature, ids of another vocabulary or outside
        `[0, vocab_size)`, no non-empty document.
    """
    task_name, feature = spec["task"], spec["feature"]
    stats = sources.RawStats()
    texts, documents, scores = [], [], []
    for task, index, example in _examples(task_name, spec["split"]):
        if feature not in example:
            raise ValueError(
                f"component {name!r}: seqio task {task.name!r} has no feature {feature!r}; "
                f"it has {sorted(example)} (set 'feature')"
            )
        value = example[feature]
        score = float(example[spec["score_field"]]) if spec["score_field"] else None
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
            f"component {name!r}: seqio {task_name!r} split {spec['split']!r} has no non-empty {feature!r}"
        )
    if stats.replaced_invalid_utf8:
        logging.warning(
            "component %r: replaced %d invalid UTF-8 bytes by U+FFFD", name, stats.replaced_invalid_utf8
        )
    if texts:
        component = mixture._tokenize(name, texts, scores, tokenizer)
        component.replaced_invalid_utf8 = stats.replaced_invalid_utf8
        return component
    score_array = np.array([np.nan if s is None else s for s in scores], np.float64)
    return mixture.Component(name, documents, float(np.mean([len(d) for d in documents])), score_array)


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


# ---------------------------------------------------------------------------------------------- export


class _ComponentDocuments:
    """The `dataset_fn(split, shuffle_files, seed)` of an exported component's `FunctionDataSource`."""

    def __init__(self, component: mixture.Component, indices, tokenizer):
        self.component, self.indices, self.tokenizer = component, np.asarray(indices), tokenizer

    def _generate(self, order: np.ndarray):
        for index in order:
            document = np.asarray(self.component.documents[int(index)], np.int32)
            yield {
                "targets": document[:-1],  # append_eos restores the final EoD
                "targets_pretokenized": self.tokenizer.decode(document.tolist()),
            }

    def __call__(self, split: str, shuffle_files: bool, seed: int | None = None) -> tf.data.Dataset:
        del split  # one split per component
        order = np.random.default_rng(seed).permutation(self.indices) if shuffle_files else self.indices
        signature = {
            "targets": tf.TensorSpec([None], tf.int32),
            "targets_pretokenized": tf.TensorSpec([], tf.string),
        }
        return tf.data.Dataset.from_generator(lambda: self._generate(order), output_signature=signature)


def register_seqio_tasks(data_config: Any, tokenizer, prefix: str = "apertus_") -> dict[str, dict[str, str]]:
    """Registers our components as seqio Tasks and our stages as seqio Mixtures (module docstring).

    Args:
      data_config: a data config (`apertus_jax.data.config`); its components are loaded with `tokenizer`.
      tokenizer: the tokenizer of the documents; the Tasks' `targets` use `TokenizerVocabulary(tokenizer)`.
      prefix: prepended to every registered name (seqio names allow letters, digits, `_ . : #`).

    Returns:
      `{"tasks": {component: task name}, "mixtures": {stage: mixture name}}`.

    Raises:
      ValueError: an invalid config or data (as `build_train_pipeline`), or a name seqio rejects.
    """
    config = normalize_data_config(data_config)
    vocabulary = TokenizerVocabulary(tokenizer)
    output_features = {"targets": seqio.Feature(vocabulary, add_eos=True, dtype=tf.int32)}
    components, tasks = {}, {}
    for name, spec in config["components"].items():
        component = mixture.load_component(name, spec, tokenizer)
        indices = mixture.host_documents(
            component, spec, split_seed=config["split_seed"], process_index=0, process_count=1
        )
        source = seqio.FunctionDataSource(
            _ComponentDocuments(component, indices, tokenizer),
            splits=[spec["split"]],
            num_input_examples={spec["split"]: len(indices)},
        )
        tasks[name] = prefix + name
        seqio.TaskRegistry.remove(tasks[name])
        seqio.TaskRegistry.add(
            tasks[name],
            source=source,
            output_features=output_features,
            preprocessors=[seqio.preprocessors.append_eos],
        )
        components[name] = component
    mixtures = {}
    for stage in config["stages"]:
        mixtures[stage["name"]] = f"{prefix}{stage['name']}_mixture"
        rates = [
            (tasks[name], weight / components[name].mean_tokens) for name, weight in stage["weights"].items()
        ]
        seqio.MixtureRegistry.remove(mixtures[stage["name"]])
        seqio.MixtureRegistry.add(mixtures[stage["name"]], rates)
    return {"tasks": tasks, "mixtures": mixtures}
