"""Multiple choice: option tokenization, the four normalisations (hand-checked), and real-model consistency."""

import pathlib

import numpy as np
import pytest

from apertus_jax.eval import multiple_choice as mc
from apertus_jax.eval.scoring import continuation_logprobs
from apertus_jax.eval.tasks import parse_exams_qa_lines

EXTRACT = pathlib.Path(__file__).parent / "assets" / "german_exams_qa_first20.jsonl"
SEQ_LEN = 256  # the longest option of the extract has 111 tokens with the 1,024-id demo BPE


@pytest.fixture(scope="module")
def questions():
    return parse_exams_qa_lines(EXTRACT.read_text(encoding="utf-8").splitlines(), "german-exams-qa")


def test_option_requests_split_the_joint_encoding(tokenizer, questions):
    question = questions[0]
    requests = mc.option_requests(tokenizer, question)
    assert len(requests) == len(question.options)
    for (context, option_ids), option in zip(requests, question.options):
        assert context[0] == tokenizer.bod_id and context[1:] == tokenizer.encode(question.prompt)
        assert context[1:] + option_ids == tokenizer.encode(question.prompt + option)
        assert tokenizer.decode(option_ids).strip() == option.strip()


def test_normalisations_pick_by_hand(tokenizer):
    """With every token costing exactly 1 nat, each normalisation's choice follows from the lengths alone."""

    def one_nat_per_token(tokens, positions, segment_ids):
        return -np.ones((tokens.shape[0], tokens.shape[1] - 1), np.float32)

    question = mc.MultipleChoiceQuestion(
        "q",
        "Welche Farbe hat der Himmel?\nAnswer:",
        (" Blau", " ein sehr helles Blau am Mittag", " Grün"),
        answer=1,
    )
    lengths = [len(option_ids) for _, option_ids in mc.option_requests(tokenizer, question)]
    result = mc.evaluate_multiple_choice(
        one_nat_per_token, tokenizer, [question], seq_len=SEQ_LEN, batch_size=2
    )
    assert result.scores == [[-float(n) for n in lengths]]
    assert result.predictions["unnormalized"] == [int(np.argmin(lengths))]  # fewest tokens
    assert result.predictions["per_token"] == [0]  # all tie at -1: the first option
    chars = [len(o) for o in question.options]
    assert result.predictions["per_char"] == [int(np.argmax([-n / c for n, c in zip(lengths, chars)]))]
    assert result.predictions["per_byte"] == result.predictions["per_char"]  # ASCII-only options
    assert result.chance == pytest.approx(1 / 3) and result.num_questions == 1


def test_per_byte_differs_from_per_char_on_non_ascii():
    option = " Größe"  # 6 characters, 8 UTF-8 bytes
    scores = mc.normalized_scores(-4.0, option, num_tokens=2)
    assert scores == {"unnormalized": -4.0, "per_token": -2.0, "per_char": -4.0 / 6, "per_byte": -0.5}


@pytest.mark.slow
def test_real_model_scores_equal_direct_option_scoring(token_logprobs, tokenizer, questions):
    result = mc.evaluate_multiple_choice(token_logprobs, tokenizer, questions, seq_len=SEQ_LEN, batch_size=4)
    summary = result.summary()
    assert set(summary) == {
        "accuracy_unnormalized",
        "accuracy_per_token",
        "accuracy_per_char",
        "accuracy_per_byte",
        "chance",
        "num_questions",
    }
    assert summary["num_questions"] == 20
    assert summary["chance"] == pytest.approx(np.mean([1 / len(q.options) for q in questions]))
    for name in mc.NORMALIZATIONS:
        correct = np.mean([p == q.answer for p, q in zip(result.predictions[name], questions)])
        assert result.accuracy[name] == pytest.approx(correct)
    # Question 3 scored on its own (unpacked batch of one) gives the same option scores.
    alone = continuation_logprobs(
        token_logprobs,
        mc.option_requests(tokenizer, questions[3]),
        seq_len=SEQ_LEN,
        batch_size=1,
        pad_id=tokenizer.pad_id,
    )
    np.testing.assert_allclose(result.scores[3], [a.sum() for a in alone], atol=1e-3)


def test_bad_questions_raise(token_logprobs, tokenizer):
    with pytest.raises(ValueError, match="no multiple-choice questions"):
        mc.evaluate_multiple_choice(token_logprobs, tokenizer, [], seq_len=SEQ_LEN, batch_size=1)
    bad = mc.MultipleChoiceQuestion("q7", "Frage?", (" a", " b"), answer=2)
    with pytest.raises(ValueError, match="q7"):
        mc.evaluate_multiple_choice(token_logprobs, tokenizer, [bad], seq_len=SEQ_LEN, batch_size=1)
