"""The distillation objective against a written-out reference: KL to the teacher's top k plus the rest, and
cross-entropy; a student equal to its teacher has zero KL."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from apertus_jax.posttrain.distillation import distillation

K = 8


def reference_loss(logits, teacher_ids, teacher_logprobs, rest_logprob, targets, mask, alpha, tau):
    """The documented loss written out in numpy, position by position, in float64."""
    total = count = 0.0
    for b, t in zip(*np.nonzero(mask)):
        z = logits[b, t].astype(np.float64)
        q = np.exp(z / tau) / np.sum(np.exp(z / tau))
        teacher = np.append(teacher_logprobs[b, t], rest_logprob[b, t]).astype(np.float64)
        p = np.exp(teacher / tau) / np.sum(np.exp(teacher / tau))
        q_top = q[teacher_ids[b, t]]
        q_all = np.append(q_top, 1.0 - q_top.sum())
        kl = np.sum(p * (np.log(p) - np.log(q_all)))
        ce = np.log(np.sum(np.exp(z))) - z[targets[b, t]]
        total += alpha * tau**2 * kl + (1 - alpha) * ce
        count += 1
    return total, count


@pytest.mark.parametrize("alpha,tau", [(0.9, 1.0), (0.5, 2.0), (0.0, 1.0)])
def test_the_objective_is_the_documented_kl_plus_cross_entropy(alpha, tau):
    rng = np.random.default_rng(0)
    rows, length, vocab = 2, 5, 16
    logits = rng.normal(size=(rows, length, vocab)).astype(np.float32)
    teacher = jax.nn.log_softmax(rng.normal(size=(rows, length, vocab)), -1)
    teacher_logprobs, teacher_ids = jax.lax.top_k(teacher, K)
    rest_logprob = np.log1p(-np.exp(np.asarray(teacher_logprobs, np.float64)).sum(-1))
    batch = {
        "targets": rng.integers(0, vocab, (rows, length)).astype(np.int32),
        "loss_mask": (rng.random((rows, length)) > 0.3).astype(np.int32),
        "teacher_ids": np.asarray(teacher_ids, np.int32),
        "teacher_logprobs": np.asarray(teacher_logprobs, np.float32),
        "rest_logprob": rest_logprob.astype(np.float32),
    }
    objective = distillation(length, K, alpha, tau)
    loss, sums = objective.loss_fn(jnp.asarray(logits), batch, None)
    names = ("teacher_ids", "teacher_logprobs", "rest_logprob", "targets", "loss_mask")
    expected, count = reference_loss(logits, *(batch[name] for name in names), alpha, tau)
    assert float(sums["count"]) == count
    np.testing.assert_allclose(float(loss), expected, rtol=1e-6)
    assert objective.batch_arrays["teacher_ids"] == ((length, K), "int32")


def test_a_student_equal_to_its_teacher_has_zero_kl():
    logits = jax.random.normal(jax.random.key(1), (1, 4, 8))
    logprobs, ids = jax.lax.top_k(jax.nn.log_softmax(logits, -1), 8)
    batch = {"targets": np.zeros((1, 4), np.int32), "loss_mask": np.ones((1, 4), np.int32)}
    batch.update(teacher_ids=np.asarray(ids), teacher_logprobs=np.asarray(logprobs))
    batch["rest_logprob"] = np.full((1, 4), -np.inf, np.float32)  # all 8 ids stored: no mass left
    _, sums = distillation(4, 8, 1.0, 1.0).loss_fn(logits, batch, None)
    assert abs(float(sums["kl"])) < 1e-5


def test_bad_alpha_or_temperature_is_refused():
    with pytest.raises(ValueError, match="alpha=1.5 must be in"):
        distillation(4, 8, 1.5, 1.0)
    with pytest.raises(ValueError, match="temperature=0"):
        distillation(4, 8, 0.5, 0)
