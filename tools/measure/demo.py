"""The demo run and what runs on its workdir: README "Try it", post-training, evaluation and lm-eval.

    values = measure_demo(REPO, scratch)

Each measurement runs the documented commands (`DEMO_RUN` first) and reads the runs' metrics.jsonl and the
JSON reports the evaluation commands write.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import statistics
import sys

from apertus_jax.eval.tasks import load_exams_qa
from tools.measure import commands, results

DEMO_VOCAB = 4096
# The documented time of training the demo BPE (README "Try it"), on its own in a fresh cache: the command of
# the demo record as measured (a module printing JSON would take re-measuring the demo run, minutes on 2 cores).
DEMO_BPE = (
    "import time; from apertus_jax.data.run_tokenizer import demo_tokenizer; "
    f"t = time.perf_counter(); demo_tokenizer({DEMO_VOCAB}); print(time.perf_counter() - t)"
)
DEMO_RUN = "python -m experiments.pretrain --config=configs/runs/tiny_demo.py --workdir=/tmp/apertus_demo"


def measure_demo(root: str, scratch: str) -> dict:
    """The README's "Try it" figures: the demo BPE's training time (a fresh cache), then the demo run in a fresh
    workdir with a fresh XLA cache (so its wall time includes compiling; the BPE and the exam questions come
    from the usual cache, trained or fetched there on first use).

    Returns:
      bpe_seconds; wall_seconds, user_seconds, system_seconds of the run's process; median_tokens_per_s over
      steps 2.. (step 1 includes compiling); the training losses (nats per token): first_loss, first10_mean,
      last20_mean, last20_median, final_loss; steps (training steps recorded); the in-loop evaluations
      (docs/ablations.md "Cost"): evals (how many), eval_step_seconds {step: `eval/seconds` of the eval after
      that step (the first includes compiling)}, eval_seconds (their sum), train_step_seconds (the time in
      train steps: the sum over steps of the step's tokens / its `tokens_per_s`), eval_share (eval_seconds /
      (train_step_seconds + eval_seconds): the share of the time spent in train steps and evals that went to
      evals; checkpointing, start-up and compiling outside the steps left out).

    Raises:
      ChildProcessError: a command failed.
    """
    bpe_cache = os.path.join(scratch, "bpe_cache")
    bpe_seconds = float(
        commands.run([sys.executable, "-c", DEMO_BPE], root, {"APERTUS_JAX_CACHE": bpe_cache}, True)
    )
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = commands.documented(
        DEMO_RUN, root, scratch, {"JAX_COMPILATION_CACHE_DIR": os.path.join(scratch, "xla")}
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    steps = commands.step_records(os.path.join(scratch, "apertus_demo"))
    evals = commands.eval_records(os.path.join(scratch, "apertus_demo"))
    losses = [r["loss"] for r in steps]
    eval_seconds = sum(r["eval/seconds"] for r in evals)
    # tokens/s of a step is its rows x length over its seconds (`apertus_jax.train.loop`)
    tokens = [0, *(r["tokens"] for r in steps)]
    train_seconds = sum((b - a) / r["tokens_per_s"] for a, b, r in zip(tokens, tokens[1:], steps))
    return {
        "bpe_seconds": round(bpe_seconds, 2),
        "wall_seconds": round(wall, 1),
        "user_seconds": round(after.ru_utime - before.ru_utime, 1),
        "system_seconds": round(after.ru_stime - before.ru_stime, 1),
        "median_tokens_per_s": round(statistics.median(r["tokens_per_s"] for r in steps[1:]), 1),
        "first_loss": losses[0],
        "first10_mean": statistics.mean(losses[:10]),
        "last20_mean": statistics.mean(losses[-20:]),
        "last20_median": statistics.median(losses[-20:]),
        "final_loss": losses[-1],
        "steps": len(steps),
        "evals": len(evals),
        "eval_step_seconds": {str(r["step"]): round(r["eval/seconds"], 2) for r in evals},
        "eval_seconds": round(eval_seconds, 2),
        "train_step_seconds": round(train_seconds, 1),
        "eval_share": eval_seconds / (train_seconds + eval_seconds),
    }


def wall_time_elsewhere(record: dict) -> str:
    """The demo run's wall time on each processor kind of the demo results `record` other than the one it was
    measured on, from that kind's record (`processors`: `times` of its latest measurement), as README "Try it"
    shows it: "KIND: N s", or "not yet measured on KIND" for a kind recorded before its times were;
    joined by "; ", "no other processor kind measured" when there is none."""
    own, shown = results.kind_of(record), []
    for kind, entry in record.get("processors", {}).items():
        seconds = entry.get("times", {}).get("wall_seconds")
        if kind != own:
            shown.append(f"not yet measured on {kind}" if seconds is None else f"{kind}: {seconds:.0f} s")
    return "; ".join(shown) or "no other processor kind measured"


# The post-training commands of docs/usage.md ("Post-training"), after the demo run, and docs/posttrain.md's
# DPO baseline started from the same SFT workdir.
POSTTRAIN_RUNS = {
    "sft": "python -m experiments.sft --config=configs/posttrain/sft_tiny.py "
    "--config.checkpoint.init_from=/tmp/apertus_demo --workdir=/tmp/apertus_sft",
    "qrpo": "python -m experiments.qrpo --config=configs/posttrain/qrpo_tiny.py "
    "--config.checkpoint.init_from=/tmp/apertus_sft --workdir=/tmp/apertus_qrpo",
    "dpo": "python -m experiments.qrpo --config=configs/posttrain/qrpo_tiny.py --config.posttrain.objective=dpo "
    "--config.posttrain.beta=0.1 --config.optim.peak_lr=3e-4 --config.checkpoint.init_from=/tmp/apertus_sft "
    "--workdir=/tmp/apertus_dpo",
}


def measure_posttrain(root: str, scratch: str) -> dict:
    """The post-training figures of docs/usage.md and posttrain.md: the demo run, then SFT from it, then QRPO
    and the DPO baseline from the SFT workdir (each in a fresh workdir; the usual XLA cache).

    Returns:
      for each STAGE of sft, qrpo, dpo: STAGE_wall_seconds, STAGE_first_loss, STAGE_final_loss,
      STAGE_first5_mean, STAGE_last5_mean (the stage's own loss: cross-entropy of assistant tokens in nats,
      the QRPO regression loss, -log sigmoid of the DPO margin); dpo_last5_margin, dpo_last5_accuracy.

    Raises:
      ChildProcessError: a command failed.
    """
    commands.documented(DEMO_RUN, root, scratch, {})
    values = {}
    for stage, line in POSTTRAIN_RUNS.items():
        values[f"{stage}_wall_seconds"] = round(commands.documented(line, root, scratch, {}), 1)
        steps = commands.step_records(os.path.join(scratch, f"apertus_{stage}"))
        losses = [r["loss"] for r in steps]
        values.update(
            {
                f"{stage}_first_loss": losses[0],
                f"{stage}_final_loss": losses[-1],
                f"{stage}_first5_mean": statistics.mean(losses[:5]),
                f"{stage}_last5_mean": statistics.mean(losses[-5:]),
            }
        )
    values["dpo_last5_margin"] = statistics.mean(r["margin"] for r in steps[-5:])
    values["dpo_last5_accuracy"] = statistics.mean(r["accuracy"] for r in steps[-5:])
    return values


# The evaluation commands of docs/usage.md ("Evaluation") on the demo workdir.
EVALUATION_RUNS = {
    "exams": "python -m experiments.evaluate --workdir=/tmp/apertus_demo --task=german_exams_qa",
    "perplexity": "python -m experiments.evaluate --workdir=/tmp/apertus_demo --task=perplexity",
}
EXAMS_VALUES = (
    "accuracy_unnormalized",
    "accuracy_per_token",
    "accuracy_per_char",
    "accuracy_per_byte",
    "chance",
)
PERPLEXITY_VALUES = ("perplexity", "nll_per_token", "bits_per_byte", "num_documents", "num_tokens")


def measure_evaluation(root: str, scratch: str) -> dict:
    """The evaluation figures of the demo workdir (docs/usage.md): the demo run, then German EXAMS-QA and the
    held-out perplexity, each from the JSON its command writes (WORKDIR/eval/TASK.json).

    Returns:
      exams_wall_seconds, perplexity_wall_seconds; exams_ACCURACY of each normalization (fraction of the
      questions), exams_chance, exams_num_questions; perplexity, nll_per_token (nats), bits_per_byte,
      num_documents, num_tokens of the held-out demo documents, and the same prefixed `unseen_languages_` for the
      UDHR translations held out whole; exams_N_options: the questions with N options.

    Raises:
      ChildProcessError: a command failed.
    """
    commands.documented(DEMO_RUN, root, scratch, {})
    values = {
        f"{name}_wall_seconds": round(commands.documented(line, root, scratch, {}), 1)
        for name, line in EVALUATION_RUNS.items()
    }
    with open(os.path.join(scratch, "apertus_demo", "eval", "german_exams_qa.json")) as f:
        exams = json.load(f)
    with open(os.path.join(scratch, "apertus_demo", "eval", "perplexity.json")) as f:
        perplexity = json.load(f)
    values.update({f"exams_{k}": exams[k] for k in (*EXAMS_VALUES, "num_questions")})
    values.update({k: perplexity[k] for k in PERPLEXITY_VALUES})
    values.update({f"unseen_languages_{k}": perplexity["unseen_languages"][k] for k in PERPLEXITY_VALUES})
    # docs/usage.md's count of the questions by their number of options (the snippet it shows).
    options = collections.Counter(len(q.options) for q in load_exams_qa("german"))
    values.update({f"exams_{n}_options": options[n] for n in sorted(options)})
    return values


# docs/lm_eval.md "German exams": the local task, then the harness and `experiments.evaluate` on the demo
# workdir, the harness with the 512-token rows `experiments.evaluate` uses (max_length + 1 tokens).
LM_EVAL_RUNS = {
    "task": "python -m experiments.lm_eval_task --output_dir=/tmp/lm_eval_tasks",
    "harness": "python -m experiments.lm_eval run --model apertus_jax "
    "--model_args workdir=/tmp/apertus_demo,max_length=511 --tasks german_exams_qa "
    "--include_path /tmp/lm_eval_tasks --batch_size 16 --output_path /tmp/lm_eval_results",
    "evaluate": EVALUATION_RUNS["exams"],
}
LM_EVAL_METRICS = ("acc", "acc_norm", "acc_bytes")


def measure_lm_eval_exams(root: str, scratch: str) -> dict:
    """docs/lm_eval.md's German EXAMS-QA through lm-evaluation-harness against `experiments.evaluate`: the
    demo run, the local task, the harness (the results JSON it writes under --output_path) and
    `experiments.evaluate` (WORKDIR/eval/german_exams_qa.json).

    Returns:
      harness_wall_seconds; harness_acc, harness_acc_norm, harness_acc_bytes, harness_num_questions;
      evaluate_ACCURACY of each normalization of `EXAMS_VALUES`, evaluate_chance, evaluate_num_questions.

    Raises:
      ChildProcessError: a command failed. ValueError: the harness wrote no single results file.
    """
    commands.documented(DEMO_RUN, root, scratch, {})
    values = {}
    for name, line in LM_EVAL_RUNS.items():
        seconds = commands.documented(line, root, scratch, {})
        if name == "harness":
            values["harness_wall_seconds"] = round(seconds, 1)
    found = [
        os.path.join(directory, n)
        for directory, _, names in os.walk(os.path.join(scratch, "lm_eval_results"))
        for n in names
        if n.startswith("results_") and n.endswith(".json")
    ]
    if len(found) != 1:
        raise ValueError(f"the harness wrote {len(found)} results files, not one: {found}")
    with open(found[0]) as f:
        harness = json.load(f)
    metrics = harness["results"]["german_exams_qa"]
    values.update({f"harness_{m}": metrics[f"{m},none"] for m in LM_EVAL_METRICS})
    values["harness_num_questions"] = harness["n-samples"]["german_exams_qa"]["effective"]
    with open(os.path.join(scratch, "apertus_demo", "eval", "german_exams_qa.json")) as f:
        exams = json.load(f)
    values.update({f"evaluate_{k}": exams[k] for k in (*EXAMS_VALUES, "num_questions")})
    return values
