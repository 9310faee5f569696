"""The lm-eval model `apertus_jax` against lm-eval's own `hf` model on the same exported checkpoint, and the
German exams task through the harness against `apertus_jax.trained.evaluate`.

Fixtures (conftest): `hf_dir`, the `tiny-llama` preset (narrowed) exported with `save_hf` with a byte-level
BPE of the demo corpus beside it; `exams_task_dir`, the committed first 20 German exams-qa questions as a
local JSON Lines task (no hub access).
"""

import os
import pathlib

import numpy as np
import pytest

# Nothing from a hub: the model, tokenizer and task data are local files (read before datasets is imported).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

lm_eval = pytest.importorskip("lm_eval")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # lm-eval's hf model imports it

from lm_eval.api.instance import Instance  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402

from apertus_jax.data import demo_corpus  # noqa: E402
from apertus_jax.eval.tasks import parse_exams_qa_lines  # noqa: E402
from apertus_jax.trained.lm_eval import ApertusJaxLM, cut_at_stop  # noqa: E402

from ..conftest import EXAMS_EXTRACT, truncated_hf_copy, write_tiny_workdir  # noqa: E402

TOLERANCE = 1e-4
TASK = "german_exams_qa"


def exams_questions():
    return parse_exams_qa_lines(EXAMS_EXTRACT.read_text(encoding="utf-8").splitlines(), "german-exams-qa")


@pytest.fixture(scope="module")
def task_manager(exams_task_dir):
    return TaskManager(include_path=exams_task_dir, include_defaults=False)


@pytest.fixture(scope="module")
def ours(hf_dir):
    return ApertusJaxLM(pretrained=hf_dir, batch_size=4)


def hf_lm(hf_dir, **kwargs):
    from lm_eval.models.huggingface import HFLM

    return HFLM(pretrained=hf_dir, dtype="float32", device="cpu", batch_size=8, **kwargs)


def evaluate(model, task_manager):
    result = lm_eval.simple_evaluate(model=model, tasks=[TASK], task_manager=task_manager, log_samples=True)
    samples = result["samples"][TASK]
    responses = [r[0] for s in sorted(samples, key=lambda s: s["doc_id"]) for r in s["resps"]]
    return result["results"][TASK], responses


@pytest.mark.slow
def test_loglikelihood_equals_lm_eval_hf_model(hf_dir, ours, task_manager):
    theirs_metrics, theirs = evaluate(hf_lm(hf_dir, add_bos_token=True), task_manager)
    our_metrics, mine = evaluate(ours, task_manager)
    assert len(mine) == len(theirs) == sum(len(q.options) for q in exams_questions()) == 69
    ll_ours, ll_theirs = np.array([float(r[0]) for r in mine]), np.array([float(r[0]) for r in theirs])
    assert np.all(ll_theirs < -10)  # real continuations of several tokens, not empty ones
    diff = np.abs(ll_ours - ll_theirs).max()
    print(f"loglikelihood: max abs diff {diff:.2e} over {len(mine)} requests, acc {our_metrics['acc,none']}")
    assert diff <= TOLERANCE
    assert [r[1] for r in mine] == [r[1] for r in theirs]
    for metric in ("acc,none", "acc_norm,none", "acc_bytes,none"):
        assert our_metrics[metric] == theirs_metrics[metric], metric


def rolling_instances(texts):
    return [Instance("loglikelihood_rolling", {}, (t,), i) for i, t in enumerate(texts)]


def test_loglikelihood_rolling_windows_equal_lm_eval_hf_model(hf_dir):
    """Texts longer than max_length=24 tokens are scored in several windows; lm-eval's hf model without
    add_bos_token encodes them as we do (no BoD in the text, BoD as the first window's prefix)."""
    texts = [
        d["text"][:300] for d in demo_corpus.load_demo_documents("heldout", sources=["german_prose"])[:3]
    ]
    mine = ApertusJaxLM(pretrained=hf_dir, batch_size=4, max_length=24)
    assert all(len(mine.tok_encode(t, add_special_tokens=False)) > 2 * 24 for t in texts)
    theirs = hf_lm(hf_dir, add_bos_token=False, max_length=24).loglikelihood_rolling(rolling_instances(texts))
    ours = mine.loglikelihood_rolling(rolling_instances(texts))
    print(f"rolling: max abs diff {np.abs(np.array(ours) - np.array(theirs)).max():.2e}")
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=TOLERANCE)


def test_loglikelihood_rolling_of_a_short_text_is_its_document_loglikelihood(ours):
    text = demo_corpus.load_demo_documents("heldout", sources=["german_prose"])[0]["text"][:120]
    ids = ours.tok_encode(text, add_special_tokens=False)
    (expected,) = ours._loglikelihood_tokens([(None, [ours.prefix_token_id], ids)])
    (rolling,) = ours.loglikelihood_rolling(rolling_instances([text]))
    assert rolling == pytest.approx(expected[0], abs=1e-5) and rolling < -len(ids)


def test_packing_in_chunks_changes_no_score(ours, monkeypatch):
    from apertus_jax.trained import lm_eval as adapter

    documents = demo_corpus.load_demo_documents("heldout", sources=["german_prose"])
    texts = [d["text"][:200] for d in documents if len(d["text"]) >= 200][:6]
    requests = [
        (None, ours.tok_encode(t[:k]), ours.tok_encode(t[k:], add_special_tokens=False))
        for t in texts
        for k in (20, 60, 110)
    ]
    whole = ours._loglikelihood_tokens(requests)
    monkeypatch.setattr(adapter, "REQUESTS_PER_PACK", 5)
    chunked = ours._loglikelihood_tokens(requests)
    assert [g for _, g in chunked] == [g for _, g in whole]
    np.testing.assert_allclose([s for s, _ in chunked], [s for s, _ in whole], rtol=0, atol=1e-5)


@pytest.mark.slow
def test_generate_until_equals_lm_eval_hf_model_greedy(hf_dir, ours):
    """Our KV-cached greedy decoding, cut at the stop strings, gives lm-eval's hf model's text."""
    contexts = ["Alle Menschen sind frei", "All human beings are born free and", "Jeder hat das Recht"]
    kwargs = {"until": ["\n\n", "Menschen"], "max_gen_toks": 12, "do_sample": False}
    requests = [Instance("generate_until", {}, (c, dict(kwargs)), i) for i, c in enumerate(contexts)]
    theirs = hf_lm(hf_dir, add_bos_token=True).generate_until(requests)
    requests = [Instance("generate_until", {}, (c, dict(kwargs)), i) for i, c in enumerate(contexts)]
    mine = ours.generate_until(requests)
    assert mine == theirs
    assert any(len(t) > 5 for t in mine)


def test_cut_at_stop():
    assert cut_at_stop("ab\n\ncd. ef", ["\n\n", "."]) == "ab"
    assert cut_at_stop("ab cd. ef", ["\n\n", "."]) == "ab cd"
    assert cut_at_stop("abc", []) == "abc"
    assert cut_at_stop("abc", ["", "x"]) == "abc"


def test_bad_model_args_are_rejected(hf_dir, tmp_path):
    with pytest.raises(ValueError, match="exactly one of"):
        ApertusJaxLM()
    with pytest.raises(ValueError, match="exactly one of"):
        ApertusJaxLM(workdir=str(tmp_path), pretrained=hf_dir)
    (tmp_path / "config.json").write_text((pathlib.Path(hf_dir) / "config.json").read_text())
    (tmp_path / "model.safetensors").symlink_to(pathlib.Path(hf_dir) / "model.safetensors")
    with pytest.raises(ValueError, match="no tokenizer.json"):
        ApertusJaxLM(pretrained=str(tmp_path))


def test_a_truncated_safetensors_file_is_refused_naming_it(hf_dir, tmp_path):
    """Before: safetensors' SafetensorError ('incomplete metadata, file not fully covered'), which lm-eval's
    command printed as a traceback."""
    broken = truncated_hf_copy(hf_dir, tmp_path / "truncated")
    with pytest.raises(ValueError) as raised:
        ApertusJaxLM(pretrained=str(broken))
    assert str(raised.value) == (
        f"{broken / 'model.safetensors'} is not a whole safetensors file (Error while deserializing header: "
        "incomplete metadata, file not fully covered); copy or export it again"
    )


def test_registered_under_its_name():
    from lm_eval.api.registry import get_model

    assert get_model("apertus_jax") is ApertusJaxLM
    assert get_model("hf").__name__ == "HFLM"  # lm-eval's own models stay reachable


@pytest.fixture(scope="module")
def demo_workdir(tmp_path_factory):
    """A trainer workdir (checkpoint at step 3) of a tiny model with the 1,024-id demo BPE."""
    workdir = str(tmp_path_factory.mktemp("run"))
    write_tiny_workdir(workdir, 3, init_std=0.5)  # scores far apart: accuracies not decided by rounding
    return workdir


@pytest.mark.slow
def test_german_exams_through_the_harness_equal_jobs_evaluate(demo_workdir, task_manager, monkeypatch):
    """Same questions, same 512-token rows: the harness's acc / acc_norm / acc_bytes are
    `apertus_jax.trained.evaluate`'s unnormalized / per-char / per-byte accuracies, request by request."""
    from apertus_jax.eval import tasks
    from apertus_jax.eval.multiple_choice import evaluate_multiple_choice
    from apertus_jax.eval.scoring import make_token_logprobs_fn
    from apertus_jax.trained import evaluate as evaluate_job

    questions = exams_questions()
    monkeypatch.setattr(tasks, "load_exams_qa", lambda language: questions)
    expected = evaluate_job.evaluate(demo_workdir, "german_exams_qa", seq_len=512, batch_size=4)
    assert expected["num_questions"] == 20

    harness = ApertusJaxLM(workdir=demo_workdir, batch_size=4, max_length=511)
    metrics, responses = evaluate(harness, task_manager)
    print(f"harness {metrics}, trained.evaluate {expected}")
    assert metrics["acc,none"] == expected["accuracy_unnormalized"]
    assert metrics["acc_norm,none"] == expected["accuracy_per_char"]
    assert metrics["acc_bytes,none"] == expected["accuracy_per_byte"]
    reference = evaluate_multiple_choice(
        make_token_logprobs_fn(harness._model), harness._tokenizer, questions, seq_len=512, batch_size=4
    )
    scores = np.array([s for per_question in reference.scores for s in per_question])
    np.testing.assert_allclose([float(r[0]) for r in responses], scores, rtol=0, atol=TOLERANCE)
    assert len(set(reference.predictions["unnormalized"])) > 1  # the model does not always pick one slot


@pytest.mark.slow
def test_workdir_in_bfloat16_scores_close_to_float32(demo_workdir):
    requests = [
        Instance(
            "loglikelihood", {}, ("Alle Menschen sind frei und gleich", " an Würde und Rechten geboren."), 0
        )
    ]
    full = ApertusJaxLM(workdir=demo_workdir, batch_size=1)
    half = ApertusJaxLM(workdir=demo_workdir, batch_size=1, dtype="bfloat16")
    assert (full._model.config.dtype, half._model.config.dtype) == ("float32", "bfloat16")
    ((ll_full, _),), ((ll_half, _),) = full.loglikelihood(requests), half.loglikelihood(requests)
    assert ll_half != ll_full and ll_half == pytest.approx(ll_full, rel=0.02)


@pytest.mark.slow
def test_export_under_lm_eval_hf_model_scores_like_the_workdir(demo_workdir, task_manager, tmp_path):
    """`experiments.export_hf`'s directory (`trained.export`: weights, tokenizer.json, configs) under lm-eval's
    own `hf` model gives the German exams scores of our adapter on the workdir itself."""
    from apertus_jax.trained.export import export_hf

    export_hf(demo_workdir, str(tmp_path))
    theirs_metrics, theirs = evaluate(hf_lm(str(tmp_path), add_bos_token=True, max_length=511), task_manager)
    our_metrics, mine = evaluate(
        ApertusJaxLM(workdir=demo_workdir, batch_size=4, max_length=511), task_manager
    )
    assert len(mine) == len(theirs) == 69
    mine, theirs = np.array([float(r[0]) for r in mine]), np.array([float(r[0]) for r in theirs])
    print(f"export under lm-eval hf: max abs loglikelihood diff {np.abs(mine - theirs).max():.2e}")
    # Sums of up to a few hundred float32 log-probabilities: the rounding grows with the sum.
    np.testing.assert_allclose(mine, theirs, rtol=1e-6, atol=TOLERANCE)
    for metric in ("acc,none", "acc_norm,none", "acc_bytes,none"):
        assert our_metrics[metric] == theirs_metrics[metric], metric
