"""The cached reference log-probs of a QRPO/DPO run, written before training (`experiments.qrpo`).

Kept apart from `pipelines` because it assembles a `Run` (which itself asks `pipelines` for the iterator).
"""

import os

import jax
from absl import logging

from apertus_jax.posttrain import reference as reference_lib
from apertus_jax.posttrain.pipelines import component_paths, reference_workdir
from apertus_jax.posttrain.preference_data import completion_examples
from apertus_jax.train.assemble import Run
from apertus_jax.train.checkpoint import restore_workdir_params


def prepare_reference_cache(config, workdir: str) -> str:
    """Makes sure `posttrain.reference_cache` (default WORKDIR/reference_logprobs.json) holds the frozen
    reference's log-probs of every candidate completion; scores them once if it does not. Returns the path.

    The reference (`reference_workdir`) is loaded on the run's mesh, used, and released before training.

    Raises:
      ValueError / FileNotFoundError: bad config or records (one line), a missing reference workdir.
    """
    path = config.posttrain.reference_cache or os.path.join(workdir, "reference_logprobs.json")
    with config.unlocked():
        config.posttrain.reference_cache = path
    run = Run(config)
    paths = component_paths(config, "preference")
    examples = completion_examples(paths, run.tokenizer)
    fingerprint = reference_lib.cache_fingerprint(paths, run.tokenizer, config.data.seq_len)
    source = reference_workdir(config)
    try:
        cache = reference_lib.read_cache(path, fingerprint, len(examples))
        if cache["reference_workdir"] == source:
            return path
    except (FileNotFoundError, ValueError):
        pass
    params, meta = restore_workdir_params(source, run.spec.abstract["params"])
    model = reference_lib.ReferenceModel(run.spec.apply_fn, params)
    with jax.set_mesh(run.mesh):
        logprobs = reference_lib.score_examples(model, examples, config.data.seq_len, run.tokenizer.pad_id)
    reference_lib.write_cache(path, logprobs, fingerprint, source, meta["progress"]["step"])
    logging.info("scored %d completions with the reference %s; cached in %s", len(examples), source, path)
    return path
