"""Our components as seqio Tasks and our stages as seqio Mixtures::

    names = register_seqio_tasks(data_config, tokenizer, prefix="apertus_")
    # names["tasks"]: component -> Task name, names["mixtures"]: stage -> Mixture name

registers one Task per component (`prefix + component`, split = the component's "split"), whose source
(a `seqio.FunctionDataSource`) yields the component's documents (after `take` and "sorted" order, all
hosts) as `targets` (EoD appended by `seqio.preprocessors.append_eos`, so `targets` equals the document
the pipeline packs) plus `targets_pretokenized` (the decoded text), and one Mixture per stage
(`prefix + stage + "_mixture"`). seqio rates count examples, our weights count tokens, so a Task's rate
is `weight / mean tokens per document`: the same document proportions `mixture.mix_components` draws.
Registering a name again replaces it. seqio's own feature converters pad with id 0, not `pad_id`. Needs the
optional extra "seqio" (`apertus_jax.data.seqio.vocabulary`).
"""

from __future__ import annotations

import numpy as np
import seqio
import tensorflow as tf

from apertus_jax.data import mixture
from apertus_jax.data.config import PipelineSpec
from apertus_jax.data.documents import Component
from apertus_jax.data.seqio.vocabulary import TokenizerVocabulary


class _ComponentDocuments:
    """The `dataset_fn(split, shuffle_files, seed)` of an exported component's `FunctionDataSource`."""

    def __init__(self, component: Component, indices, tokenizer):
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


def register_seqio_tasks(
    pipeline: PipelineSpec, tokenizer, prefix: str = "apertus_"
) -> dict[str, dict[str, str]]:
    """Registers our components as seqio Tasks and our stages as seqio Mixtures (module docstring).

    Args:
      pipeline: a typed pipeline (`apertus_jax.data.config.parse_pipeline`); its document components are
        loaded with `tokenizer`.
      tokenizer: the tokenizer of the documents; the Tasks' `targets` use `TokenizerVocabulary(tokenizer)`.
      prefix: prepended to every registered name (seqio names allow letters, digits, `_ . : #`).

    Returns:
      `{"tasks": {component: task name}, "mixtures": {stage: mixture name}}`.

    Raises:
      ValueError: bad data (as `TrainIterator`), or a name seqio rejects.
    """
    vocabulary = TokenizerVocabulary(tokenizer)
    output_features = {"targets": seqio.Feature(vocabulary, add_eos=True, dtype=tf.int32)}
    components, tasks = {}, {}
    for name, spec in pipeline.mixed().items():
        component = spec.load(name, tokenizer)
        indices = mixture.host_documents(
            component, spec, split_seed=pipeline.split_seed, process_index=0, process_count=1
        )
        split = getattr(spec, "split", "train")  # demo and seqio components name theirs
        source = seqio.FunctionDataSource(
            _ComponentDocuments(component, indices, tokenizer),
            splits=[split],
            num_input_examples={split: len(indices)},
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
    for stage in pipeline.stages:
        mixtures[stage.name] = f"{prefix}{stage.name}_mixture"
        rates = [
            (tasks[name], weight / components[name].mean_tokens) for name, weight in stage.weights.items()
        ]
        seqio.MixtureRegistry.remove(mixtures[stage.name])
        seqio.MixtureRegistry.add(mixtures[stage.name], rates)
    return {"tasks": tasks, "mixtures": mixtures}
