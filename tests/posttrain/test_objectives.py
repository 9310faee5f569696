"""QRPO and DPO: quantile reward by hand, the loss at initialization, one step's direction, length
normalization, DPO's log 2 and gradient signs."""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from apertus_jax.posttrain import chat
from apertus_jax.posttrain.objectives import (
    dpo_loss,
    dpo_margin,
    log_partition,
    qrpo_loss,
    qrpo_terms,
    quantile_reward,
    slot_logprobs,
)
from apertus_jax.posttrain.preference_data import PreferencePipeline
from apertus_jax.posttrain.reference import ReferenceModel, on_the_fly_reference
from apertus_jax.train.step import make_train_step

PROMPT = "Was sagt Artikel 1 der Menschenrechtserklärung?"
HIGH = "Alle Menschen sind frei und gleich an Würde und Rechten geboren."
LOW = "Das steht im Grundgesetz."


def test_quantile_reward_by_hand():
    references = [0.1, 0.5, 0.7, 0.2]
    # 0.5 >= {0.1, 0.5, 0.2}: 3 of 4; 0.05 >= none; 0.7 >= all.
    np.testing.assert_array_equal(quantile_reward([0.5, 0.05, 0.7], [references] * 3), [0.75, 0.0, 1.0])
    assert quantile_reward(0.3, references) == 0.5


@pytest.mark.parametrize("beta", [0.03, 0.2, 1.0, 5.0])
def test_log_partition_is_log_of_the_uniform_expectation(beta):
    # Z = integral_0^1 exp(u / beta) du, by the trapezoid rule on a fine grid.
    u = np.linspace(0.0, 1.0, 2_000_001)
    z = np.trapezoid(np.exp((u - 1.0) / beta), u)  # scaled by exp(-1/beta) against overflow
    np.testing.assert_allclose(
        float(log_partition(jnp.float64(beta) if jax.config.x64_enabled else beta)),
        math.log(z) + 1 / beta,
        rtol=1e-6,
    )


@pytest.fixture(scope="module")
def toy(tmp_path_factory, tokenizer, small_model):
    """The reference (= the initial policy) and, per mode, the first 2-row batch of one prompt with a high-
    and a low-reward completion."""
    path = tmp_path_factory.mktemp("toy") / "toy.jsonl"
    record = {
        "prompt": PROMPT,
        "completions": [{"text": HIGH, "reward": 1.0}, {"text": LOW, "reward": 0.0}],
        "reference_rewards": [0.0, 0.3, 0.5, 0.9],
    }
    path.write_text(json.dumps(record) + "\n")
    reference = ReferenceModel(*small_model)

    def batch(mode):
        pipeline = PreferencePipeline(
            [str(path)],
            tokenizer,
            mode=mode,
            seq_len=128,
            batch_size=2,
            process_index=0,
            process_count=1,
            seed=0,
            make_reference=lambda examples: on_the_fly_reference(reference),
        )
        return next(pipeline)

    return {"reference": reference, "qrpo": batch("qrpo"), "dpo": batch("dpo")}


def _sgd_step(apply_fn, loss_fn, lr):
    return jax.jit(make_train_step(apply_fn, optax.sgd(lr), 1, loss_fn=loss_fn)), optax.sgd(lr).init


@pytest.fixture(scope="module")
def qrpo_step(toy, small_model):
    """(metrics at initialization, parameters after one SGD step) of QRPO on the toy batch."""
    apply_fn, params = small_model
    step, init = _sgd_step(apply_fn, qrpo_loss(5.0, True), 0.05)
    new_params, _, metrics = step(jax.tree.map(jnp.copy, params), init(params), toy["qrpo"])
    return jax.device_get(metrics), new_params


def test_qrpo_loss_at_initialization(toy, tokenizer, qrpo_step):
    metrics, _ = qrpo_step
    batch = toy["qrpo"]
    lengths = {
        1.0: len(tokenizer.encode(HIGH)) + 1,
        0.25: len(tokenizer.encode(LOW)) + 1,
    }  # + <|assistant_end|>
    quantiles = batch["quantile_reward"][:, 0].astype(np.float64)
    np.testing.assert_array_equal(sorted(quantiles), [0.25, 1.0])  # 0.0 >= {0.0}; 1.0 >= all four
    b = 5.0 / np.array([lengths[q] for q in quantiles])
    logz = np.log(b * np.expm1(1 / b))
    expected = np.mean((quantiles - b * logz) ** 2)
    assert float(metrics["unmasked_tokens"]) == 2  # the count: two examples
    np.testing.assert_allclose(float(metrics["loss"]), expected, rtol=1e-5)
    np.testing.assert_allclose(float(metrics["log_ratio"]), 0.0, atol=1e-5)
    assert float(metrics["quantile_reward"]) == pytest.approx(0.625)


def test_one_qrpo_step_raises_the_high_quantile_completion(toy, small_model, qrpo_step):
    _, params = small_model
    metrics, new_params = qrpo_step
    batch, reference = toy["qrpo"], toy["reference"]
    high = int(np.argmax(batch["quantile_reward"][:, 0]))
    change = reference.score(batch, new_params)[:, 0] - reference.score(batch, params)[:, 0]
    assert float(metrics["finite"]) == 1.0
    assert change[high] > change[1 - high], change


def test_length_normalization_divides_beta_by_the_completion_tokens():
    lengths = jnp.array([5.0, 20.0])
    per_token_ratio = -0.3
    logp, ref = lengths * per_token_ratio, jnp.zeros(2)
    quantile = jnp.array([0.5, 0.5])
    residual, b = qrpo_terms(logp, ref, quantile, lengths, 5.0, True)
    np.testing.assert_allclose(b, [1.0, 0.25])
    # The KL term is b/|y| times the sequence log-ratio: the per-token ratio times b, whatever the length.
    np.testing.assert_allclose(residual - (quantile - b * log_partition(b)), [5.0 * 0.3] * 2, rtol=1e-6)
    unnormalized, b_plain = qrpo_terms(logp, ref, quantile, lengths, 5.0, False)
    np.testing.assert_allclose(b_plain, [5.0, 5.0])
    np.testing.assert_allclose(
        unnormalized - (quantile - 5.0 * log_partition(5.0)), 5.0 * 0.3 * lengths, rtol=1e-6
    )


def test_completion_length_counts_content_and_assistant_end(toy, tokenizer):
    batch = toy["qrpo"]
    logits = jnp.zeros((*batch["tokens"].shape, 4096))
    lengths = sorted(np.asarray(slot_logprobs(logits, batch)[1][:, 0]).tolist())
    assert lengths == sorted([len(tokenizer.encode(HIGH)) + 1.0, len(tokenizer.encode(LOW)) + 1.0])


def test_dpo_loss_is_log2_at_initialization_and_one_step_widens_the_margin(toy, tokenizer, small_model):
    apply_fn, params = small_model
    batch = toy["dpo"]
    ids = chat.render_completion(HIGH, tokenizer)
    assert batch["targets"][0][batch["segment_ids"][0] == 1][-len(ids) :].tolist() == ids.tolist()  # chosen
    step, init = _sgd_step(apply_fn, dpo_loss(0.1, False), 0.5)
    params, opt_state, at_init = step(jax.tree.map(jnp.copy, params), init(params), batch)
    _, _, after = step(params, opt_state, batch)  # metrics of the parameters after one step
    assert float(at_init["unmasked_tokens"]) == 2  # two pairs
    np.testing.assert_allclose(float(at_init["loss"]), math.log(2), rtol=1e-6)
    assert float(after["margin"]) > float(at_init["margin"]) == 0.0


@pytest.mark.parametrize("normalized", [False, True])
def test_dpo_gradient_raises_chosen_and_lowers_rejected(normalized):
    lengths = jnp.array([[12.0, 5.0]])
    ref = jnp.array([[-20.0, -9.0]])

    def loss(logp):
        return jnp.sum(jax.nn.softplus(-dpo_margin(logp, ref, lengths, 0.1, normalized)))

    grad = jax.grad(loss)(jnp.array([[-20.0, -9.0]]))
    assert grad[0, 0] < 0 < grad[0, 1]  # descent raises log pi(chosen), lowers log pi(rejected)
    expected = 0.5 * 0.1 / (lengths if normalized else 1.0)
    np.testing.assert_allclose(jnp.abs(grad), expected, rtol=1e-6)
