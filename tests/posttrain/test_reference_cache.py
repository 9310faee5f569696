"""prepare_reference_cache: a valid cache of the same reference is reused without loading the reference;
one of another reference is recomputed (scoring itself: tests/posttrain/test_pipelines.py)."""

import json
import os

import pytest

from apertus_jax.posttrain import reference as reference_lib
from apertus_jax.posttrain.reference_cache import prepare_reference_cache
from configs import qrpo_tiny


def _config(reference):
    config = qrpo_tiny.get_config()
    config.unlock()
    config.train.batch_plan = ((0, 8 * 128),)  # the tests' 8 virtual devices
    config.checkpoint.init_from = reference
    return config


def _write(path, config, tokenizer, reference):
    paths = config.data.pipeline.components.preference.paths
    fingerprint = reference_lib.cache_fingerprint(list(paths), tokenizer, 128)
    reference_lib.write_cache(str(path), [-1.0] * 36, fingerprint, reference, 60)


def test_valid_cache_is_reused_and_another_references_is_not(tmp_path, tokenizer):
    reference = str(tmp_path / "sft")  # never created: loading it would fail
    workdir = tmp_path / "qrpo"
    config = _config(reference)
    _write(workdir / "reference_logprobs.json", config, tokenizer, reference)
    assert prepare_reference_cache(config, str(workdir)) == str(workdir / "reference_logprobs.json")
    assert config.posttrain.reference_cache == str(workdir / "reference_logprobs.json")
    assert json.loads((workdir / "reference_logprobs.json").read_text())["logprobs"] == [-1.0] * 36

    _write(workdir / "reference_logprobs.json", config, tokenizer, "another/workdir")
    with pytest.raises(FileNotFoundError, match=f"{reference} has no checkpoints/"):
        prepare_reference_cache(_config(reference), str(workdir))
    assert not os.path.exists(reference)
