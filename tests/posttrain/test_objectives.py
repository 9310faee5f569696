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
from apertus_jax.train.step import Objective, make_train_step

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
    reference = ReferenceModel(small_model[0].apply_fn, small_model[1])

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


def _sgd_step(spec, loss_fn, lr):
    step = jax.jit(make_train_step(spec, optax.sgd(lr), Objective(loss_fn), 1))
    return lambda params, opt_state, batch: step(params, opt_state, batch, None), optax.sgd(lr).init


@pytest.fixture(scope="module")
def qrpo_step(toy, small_model):
    """(metrics at initialization, parameters after one SGD step) of QRPO on the toy batch."""
    spec, params = small_model
    step, init = _sgd_step(spec, qrpo_loss(5.0, True), 0.05)
    new_params, _, metrics = step(jax.tree.map(jnp.copy, params), init(params), toy["qrpo"])
    return jax.device_get(metrics), new_params


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_dpo_loss_is_log2_at_initialization_and_one_step_widens_the_margin(toy, tokenizer, small_model):
    spec, params = small_model
    batch = toy["dpo"]
    ids = chat.render_completion(HIGH, tokenizer)
    assert batch["targets"][0][batch["segment_ids"][0] == 1][-len(ids) :].tolist() == ids.tolist()  # chosen
    step, init = _sgd_step(spec, dpo_loss(0.1, False), 0.5)
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


def trainer_qrpo_losses(beta, logps, ref_logps, quantiles, lens, normalize_beta_by_length):
    """Per-completion QRPO losses as the Apertus post-training trainer computes them (github.com/swiss-ai/
    posttraining, src/post_training/trainers/preference.py, `qrpo_loss`), transcribed to float32 numpy: beta
    divided by the completion length, capped at 0.1, then beta log Z by its two branches (simplified below
    0.2, exact above, where beta is floored at 0.2 against overflow), the squared residual. The trainer
    averages the chosen and the rejected completion's losses per pair, then the pairs."""
    f32 = np.float32
    b = np.full(lens.shape, beta, f32)
    if normalize_beta_by_length:
        b = b / lens
    b = np.minimum(b, f32(0.1))
    simplified = (b <= 0.2).astype(f32)
    b_log_z = b * np.log(b)
    floored = np.maximum(b, f32(0.2))
    b_log_z = b_log_z + floored * np.log(np.exp(1 / floored) - 1) * (1 - simplified) + simplified
    return (quantiles - b_log_z - b * (logps - ref_logps)) ** 2


@pytest.mark.parametrize("normalized", [True, False])
def test_apertus_trainer_variant_equals_the_trainers_loss(normalized):
    """Completions of 1 to 1,000 tokens, log-ratios of -0.5..0.5 nats per token: `qrpo_variant=
    "apertus_trainer"` gives the trainer's losses to float32 rounding; the exact loss differs where the cap
    binds (b / |y| > 0.1: |y| < 50 at b = 5) and agrees to 1e-5 (relative) elsewhere."""
    rng = np.random.default_rng(0)
    lens = np.array([1, 3, 10, 25, 49, 50, 51, 80, 200, 1000, 7, 64], np.float32)
    ref_logps = (-2.0 * lens).astype(np.float32)
    logps = (ref_logps + lens * rng.uniform(-0.5, 0.5, lens.shape)).astype(np.float32)
    quantiles = rng.choice([0.0, 0.1, 0.5, 0.9, 1.0], lens.shape).astype(np.float32)
    expected = trainer_qrpo_losses(5.0, logps, ref_logps, quantiles, lens, normalized)
    args = (jnp.asarray(logps), jnp.asarray(ref_logps), jnp.asarray(quantiles), jnp.asarray(lens), 5.0)
    residual, b = qrpo_terms(*args, normalized, "apertus_trainer")
    np.testing.assert_allclose(np.asarray(residual) ** 2, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b, np.minimum(5.0 / lens if normalized else 5.0, 0.1), rtol=1e-6)
    # The trainer's pair mean (chosen = first half, rejected = second half) is the mean over completions.
    pairs = (expected[:6] + expected[6:]) / 2
    np.testing.assert_allclose(float(np.mean(np.asarray(residual) ** 2)), pairs.mean(), rtol=1e-6)
    exact, b_exact = (np.asarray(x) for x in qrpo_terms(*args, normalized, "exact"))
    gap = exact - np.asarray(residual)
    capped = b_exact > 0.1
    assert capped.sum() == (6 if normalized else 12)
    print("exact - trainer residual where capped:", gap[capped])
    assert np.all(np.abs(gap[capped]) > 1e-2)
    # Elsewhere only the dropped term of log Z remains: b' log(1 - e^{-1/b'}), at most 4.6e-6 in size.
    dropped = b_exact * np.log(-np.expm1(-1 / b_exact.astype(np.float64)))
    np.testing.assert_allclose(gap[~capped], -dropped[~capped], rtol=0, atol=1e-6)


def test_objective_for_reads_the_variant(toy):
    """`posttrain.qrpo_variant` reaches the train step's loss: on the toy rows (completions of fewer than 50
    tokens) with uniform logits, the step's loss sum is the trainer's."""
    from apertus_jax.posttrain.config import PosttrainConfig
    from apertus_jax.posttrain.objectives import objective_for

    batch = toy["qrpo"]
    logits = jnp.zeros((*batch["tokens"].shape, 4096))
    logp, lengths = (np.asarray(x)[:, 0] for x in slot_logprobs(logits, batch))
    assert np.all(lengths < 50)
    sums = {}
    for variant in ("exact", "apertus_trainer"):
        config = PosttrainConfig(objective="qrpo", data=["toy.jsonl"], qrpo_variant=variant)
        sums[variant], aux = objective_for(config).loss_fn(logits, batch, None)
    expected = trainer_qrpo_losses(
        5.0, logp, batch["ref_logprobs"][:, 0], batch["quantile_reward"][:, 0], lengths, True
    )
    assert float(aux["count"]) == 2
    np.testing.assert_allclose(float(sums["apertus_trainer"]), expected.sum(), rtol=1e-5)
    assert abs(float(sums["exact"]) - expected.sum()) > 1e-2
