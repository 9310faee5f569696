"""Reference log-probs: the cache written once equals scoring on the fly; the cache refuses other inputs."""

import numpy as np
import pytest

from apertus_jax.posttrain import reference as reference_lib
from apertus_jax.posttrain.preference_data import PreferencePipeline, completion_examples


@pytest.fixture(scope="module")
def cached(preference_path, tokenizer, small_model):
    model = reference_lib.ReferenceModel(small_model[0].apply_fn, small_model[1])
    examples = completion_examples([preference_path], tokenizer)
    return model, reference_lib.score_examples(model, examples, 128, tokenizer.pad_id)


def _pipeline(path, tokenizer, mode, make_reference):
    return PreferencePipeline(
        [path],
        tokenizer,
        mode=mode,
        seq_len=128,
        batch_size=8,
        process_index=0,
        process_count=1,
        seed=1,
        make_reference=make_reference,
    )


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["qrpo", "dpo"])
def test_cached_equals_on_the_fly(cached, preference_path, tokenizer, mode):
    model, logprobs = cached
    assert logprobs.shape == (36,) and np.all(logprobs < 0)
    from_cache = _pipeline(
        preference_path, tokenizer, mode, lambda e: reference_lib.cached_reference(logprobs)
    )
    on_the_fly = _pipeline(
        preference_path, tokenizer, mode, lambda e: reference_lib.on_the_fly_reference(model)
    )
    for _ in range(2):
        a, b = next(from_cache), next(on_the_fly)
        for key in ("tokens", "targets", "loss_mask", "quantile_reward"):
            np.testing.assert_array_equal(a[key], b[key])
        # The same model on rows of other layouts (one vs two completions per row): float32 rounding only.
        np.testing.assert_allclose(a["ref_logprobs"], b["ref_logprobs"], rtol=1e-5, atol=1e-4)
        filled = (b["segment_ids"][:, :, None] == np.arange(1, 3)).any(axis=1)
        assert np.all((a["ref_logprobs"] != 0) == filled)


def test_cache_round_trip_is_exact_and_checks_its_inputs(
    cached, preference_path, chat_path, tokenizer, tmp_path
):
    _, logprobs = cached
    path = str(tmp_path / "reference_logprobs.json")
    fingerprint = reference_lib.cache_fingerprint([preference_path], tokenizer, 128)
    reference_lib.write_cache(path, logprobs, fingerprint, "workdir/sft_tiny", 60)
    cache = reference_lib.read_cache(path, fingerprint, len(logprobs))
    np.testing.assert_array_equal(np.asarray(cache["logprobs"], np.float32), logprobs)
    assert cache["reference_step"] == 60
    other = reference_lib.cache_fingerprint([chat_path], tokenizer, 128)
    with pytest.raises(ValueError, match="other preference files"):
        reference_lib.read_cache(path, other, len(logprobs))
    with pytest.raises(FileNotFoundError, match="experiments.qrpo"):
        reference_lib.read_cache(str(tmp_path / "missing.json"), fingerprint, 1)
