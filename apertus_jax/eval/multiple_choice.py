"""Multiple choice by conditional log-likelihood of each option (Boldt, docs/recipe.md sections 8 and 9).

Each option is scored as `log p(option | prompt)`; the prediction is the option with the highest score,
under four normalisations reported side by side (docs/recipe.md 9):

- `accuracy_unnormalized`: the summed log-likelihood (favours short options);
- `accuracy_per_token`: divided by the option's number of tokens (tokenizer-dependent);
- `accuracy_per_char`: divided by its number of Unicode characters (lm-eval-harness `acc_norm`);
- `accuracy_per_byte`: divided by its number of UTF-8 bytes (tokenizer-independent, fair across scripts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from apertus_jax.eval.scoring import TokenLogprobsFn, continuation_logprobs
from apertus_jax.tokenizers.base import Tokenizer

NORMALIZATIONS = ("unnormalized", "per_token", "per_char", "per_byte")


@dataclasses.dataclass(frozen=True)
class MultipleChoiceQuestion:
    """One question: the prompt (ends before the answer, e.g. "...\\nAntwort:"), the options as they
    continue the prompt (usually with a leading space), and the index of the correct option."""

    question_id: str
    prompt: str
    options: tuple[str, ...]
    answer: int


def option_requests(
    tokenizer: Tokenizer, question: MultipleChoiceQuestion
) -> list[tuple[list[int], list[int]]]:
    """`(context_ids, option_ids)` per option: BoD + prompt, and the option's tokens.

    The option is tokenized jointly with the prompt and split after the prompt's tokens (as lm-eval-harness
    does), so the option gets the tokens it would have inside the running text; a trailing space of the
    prompt moves to the option. Falls back to tokenizing the option alone if the joint encoding changes the
    prompt's tokens.
    """
    prompt = question.prompt.rstrip(" ")
    moved = question.prompt[len(prompt) :]
    context = tokenizer.encode(prompt)
    requests = []
    for option in question.options:
        whole = tokenizer.encode(prompt + moved + option)
        split = (
            whole[len(context) :] if whole[: len(context)] == context else tokenizer.encode(moved + option)
        )
        requests.append(([tokenizer.bod_id, *context], split))
    return requests


@dataclasses.dataclass(frozen=True)
class MultipleChoiceResult:
    """Accuracies (fractions in [0, 1]) per normalisation, the chance level and per-question details.

    `predictions[name][i]` is the predicted option index of question i; `scores[i]` is the summed
    log-likelihood (nats) of each option of question i.
    """

    num_questions: int
    accuracy: dict[str, float]
    chance: float
    predictions: dict[str, list[int]]
    scores: list[list[float]]

    def summary(self) -> dict[str, float]:
        """Flat `{"accuracy_per_byte": ..., ..., "chance": ..., "num_questions": ...}`."""
        return {
            **{f"accuracy_{k}": v for k, v in self.accuracy.items()},
            "chance": self.chance,
            "num_questions": self.num_questions,
        }


def normalized_scores(logprob_sum: float, option: str, num_tokens: int) -> dict[str, float]:
    """The option's score under each normalisation (higher is better)."""
    return {
        "unnormalized": logprob_sum,
        "per_token": logprob_sum / num_tokens,
        "per_char": logprob_sum / max(len(option), 1),
        "per_byte": logprob_sum / max(len(option.encode("utf-8")), 1),
    }


def evaluate_multiple_choice(
    token_logprobs: TokenLogprobsFn,
    tokenizer: Tokenizer,
    questions: Sequence[MultipleChoiceQuestion],
    *,
    seq_len: int,
    batch_size: int,
) -> MultipleChoiceResult:
    """Scores every option of every question in one packed pass and reports the four accuracies.

    Args:
      token_logprobs: from `apertus_jax.eval.scoring.make_token_logprobs_fn(model)`.
      tokenizer: the model's tokenizer.
      questions: the questions (each with >= 2 options).
      seq_len: row length for scoring (<= the model's context); long prompts are cut on the left.
      batch_size: rows per forward pass.

    Raises:
      ValueError: no questions, a question with < 2 options or an answer index out of range.
    """
    if not questions:
        raise ValueError("no multiple-choice questions to evaluate")
    for q in questions:
        if len(q.options) < 2 or not 0 <= q.answer < len(q.options):
            raise ValueError(
                f"question {q.question_id}: needs >= 2 options and a valid answer index, "
                f"got {len(q.options)} options and answer {q.answer}"
            )
    requests = [option_requests(tokenizer, q) for q in questions]
    flat = [r for rs in requests for r in rs]
    logprobs = iter(
        continuation_logprobs(
            token_logprobs, flat, seq_len=seq_len, batch_size=batch_size, pad_id=tokenizer.pad_id
        )
    )
    predictions = {name: [] for name in NORMALIZATIONS}
    correct = dict.fromkeys(NORMALIZATIONS, 0)
    scores = []
    for question, reqs in zip(questions, requests):
        sums = [float(np.sum(next(logprobs), dtype=np.float64)) for _ in reqs]
        scores.append(sums)
        per_option = [normalized_scores(s, o, len(r[1])) for s, o, r in zip(sums, question.options, reqs)]
        for name in NORMALIZATIONS:
            best = int(np.argmax([p[name] for p in per_option]))
            predictions[name].append(best)
            correct[name] += best == question.answer
    n = len(questions)
    return MultipleChoiceResult(
        num_questions=n,
        accuracy={k: correct[k] / n for k in NORMALIZATIONS},
        chance=float(np.mean([1.0 / len(q.options) for q in questions])),
        predictions=predictions,
        scores=scores,
    )
