"""The registered measurements behind the figures the docs quote, and the job that re-measures them.

    measure_all(REPO, ["demo"])  # = python -m experiments.measure --only demo

Each `Measurement` runs its documented command(s) in the repository, as a reader would, in a scratch
directory of its own, and returns its values (a value may be a dict of values: `NAME.variant.metric`); `measure_all` writes each one's `docs/results/NAME.json`
(`apertus_jax.jobs.results`) and then rewrites every bound figure of README.md and docs/ from the results
files. Values named in `deterministic` are the same in every fresh run on one machine (tests compare them
with a fresh run); the others (seconds, tokens/s) are of the machine and its load at the time.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import json
import os
import re
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from absl import logging

from apertus_jax import files
from apertus_jax.eval.tasks import load_exams_qa
from apertus_jax.jobs import compare, results

# The repository whose commands are run and whose docs are rewritten: the checkout this package is in.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclasses.dataclass(frozen=True)
class Measurement:
    """A measurement: `measure(root, scratch)` runs `command` (the documented command(s), one per line) in the
    repository ROOT with its files under the empty directory `scratch` and returns {value name: value}."""

    command: str
    measure: Callable[[str, str], dict]
    deterministic: tuple[str, ...]
    rechecked: bool = True  # the slow tests compare `deterministic` with a fresh run (False: too long for CI)
    # On another processor model the runs differ in the last bits from the first steps on, and training
    # amplifies that: there a fresh run agrees with the record within this relative tolerance only.
    other_machine_rtol: float = 0.05


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


def _step_records(workdir: str) -> list[dict]:
    """The training-step records of WORKDIR/metrics.jsonl (those with a `loss`; evaluations left out)."""
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if "loss" in r]


DEMO_VOCAB = 4096
# The documented time of training the demo BPE (README "Try it"), on its own in a fresh cache.
DEMO_BPE = (
    "import time; from apertus_jax.data.tokenizer import demo_tokenizer; "
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
      last20_mean, last20_median, final_loss.

    Raises:
      ChildProcessError: a command failed.
    """
    bpe_cache = os.path.join(scratch, "bpe_cache")
    bpe_seconds = float(_run([sys.executable, "-c", DEMO_BPE], root, {"APERTUS_JAX_CACHE": bpe_cache}, True))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = _documented(DEMO_RUN, root, scratch, {"JAX_COMPILATION_CACHE_DIR": os.path.join(scratch, "xla")})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    steps = _step_records(os.path.join(scratch, "apertus_demo"))
    losses = [r["loss"] for r in steps]
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
    }


# The README's post-training commands (section "Post-training"), after the demo run, and docs/posttrain.md's
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
    """The post-training figures of the README and docs/posttrain.md: the demo run, then SFT from it, then QRPO
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


# The README's evaluation commands (section "Evaluation") on the demo workdir.
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
    """The README's evaluation figures of the demo workdir: the demo run, then German EXAMS-QA and the held-out
    perplexity, each from the JSON its command writes (WORKDIR/eval/TASK.json).

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
    # The README's count of the questions by their number of options (the snippet it shows).
    options = collections.Counter(len(q.options) for q in load_exams_qa("german"))
    values.update({f"exams_{n}_options": options[n] for n in sorted(options)})
    return values


GOLDFISH_RUN = "python -m experiments.goldfish_study --out=/tmp/goldfish_study"
GOLDFISH_SCORES = ("rouge_l", "lccs", "exact_matches", "unseen_rouge_l")


def measure_goldfish(root: str, scratch: str) -> dict:
    """The README's Goldfish-study figures: `experiments.goldfish_study` with its defaults, from the
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


# The README's memory-plan commands ("Scaling up"), by model and context.
PLAN_RUNS = {
    "8b": "python -m experiments.memory_plan --config=configs/runs/apertus_8b.py --rows_per_device=1",
    "70b": "python -m experiments.memory_plan --config=configs/runs/apertus_70b.py "
    "--meshes=1x256x1,1x64x4,1x32x1,1x16x1 --rows_per_device=1",
    "8b_64k": "python -m experiments.memory_plan --config=configs/runs/apertus_8b_long_context.py:64k "
    "--meshes=1x16x1x4,1x64x1x1 --rows_per_device=1",
    "70b_64k": "python -m experiments.memory_plan --config=configs/runs/apertus_70b_long_context.py:64k "
    "--meshes=1x8x4x8 --rows_per_device=1",
}
# A row of the table `experiments.memory_plan` prints (`apertus_jax.jobs.memory_plan.plan_lines`).
PLAN_ROW = re.compile(
    r"^\| (?P<mesh>[\dx]+) \((?P<devices>\d+) dev; batch \d+ rows = (?P<microbatches>\d+) x (?P<rows>\d+)\) "
    r"\| (?P<params>[\d.]+) \| (?P<optimizer>[\d.]+) \| (?P<activations>[\d.]+) \| (?P<total>[\d.]+) "
    r"\| (?P<fits_80>yes|no) \| (?P<fits_141>yes|no) \| (?P<fits_95>yes|no) \|",
    re.MULTILINE,
)


def measure_memory_plan(root: str, scratch: str) -> dict:
    """The README's memory plans: each command's printed table.

    Returns:
      wall_seconds {model: seconds}; for each planned mesh, MODEL_MESH (e.g. `8b_1x64x1`, `8b_1x16x1x4`):
      {devices, microbatches, rows (per microbatch), params, optimizer, activations, total (GB = 1e9 bytes per
      device, as printed: 2 decimals), fits_80, fits_141, fits_95 ("yes" | "no": H100 80GB, H200 141GB, TPU
      v5p 95GB)}.

    Raises:
      ChildProcessError: a command failed. ValueError: a command printed no table row.
    """
    del scratch  # nothing is written
    values = {"wall_seconds": {}}
    for model, line in PLAN_RUNS.items():
        start = time.perf_counter()
        printed = _run([sys.executable, *shlex.split(line)[1:]], root, {}, capture=True)
        values["wall_seconds"][model] = round(time.perf_counter() - start, 1)
        rows = list(PLAN_ROW.finditer(printed))
        if not rows:
            raise ValueError(f"`{line}` printed no row of the memory-plan table (its format changed?)")
        for row in rows:
            fields = row.groupdict()
            key = f"{model.split('_')[0]}_{fields.pop('mesh')}"
            values[key] = {
                k: v if k.startswith("fits") else (float(v) if "." in v else int(v))
                for k, v in fields.items()
            }
    return values


# The README's count of the demo corpus ("Your own data"), as it prints it.
CORPUS_COUNT = (
    "from apertus_jax.data.demo_corpus import load_udhr, udhr_languages, load_german_prose as prose; "
    "print(len(load_udhr()), 'translations,', len({l['iso6393'] for l in udhr_languages()} - {'und'}), "
    "'languages,', round(sum(len(d['text'].encode()) for d in prose()) / 1e6, 2), 'MB of German prose')"
)
CORPUS_PRINTED = re.compile(r"(\d+) translations, (\d+) languages, ([\d.]+) MB of German prose")


# The demo corpus's splits (docs/data.md), as counted by `load_demo_documents`.
SPLIT_COUNT = (
    "from apertus_jax.data.demo_corpus import load_demo_documents as split; h = split('heldout', ['udhr']); "
    "print(len(h), 'held-out UDHR paragraphs of', len({d['code'] for d in h}), 'translations,', "
    "len(split('heldout', ['german_prose'])), 'held-out prose documents,', len(split('unseen_languages')), "
    "'unseen-language translations')"
)
SPLIT_PRINTED = re.compile(
    r"(\d+) held-out UDHR paragraphs of (\d+) translations, (\d+) held-out prose documents, "
    r"(\d+) unseen-language translations"
)

DEMO_SPLIT_VALUES = (
    "heldout_udhr_paragraphs",
    "heldout_udhr_translations",
    "heldout_prose_documents",
    "unseen_translations",
)


def measure_demo_corpus(root: str, scratch: str) -> dict:
    """The counts of the vendored demo corpus and its splits, from the lines their commands print.

    Returns:
      udhr_translations, udhr_languages (ISO 639-3 codes, `und` left out), prose_mb (UTF-8 MB = 1e6 bytes of the
      German prose, 2 decimals as printed); heldout_udhr_paragraphs, heldout_udhr_translations (the
      translations they come from), heldout_prose_documents, unseen_translations (held out whole).

    Raises:
      ChildProcessError: a command failed. ValueError: it printed no count.
    """
    del scratch  # nothing is written
    printed = CORPUS_PRINTED.search(_run([sys.executable, "-c", CORPUS_COUNT], root, {}, capture=True))
    splits = SPLIT_PRINTED.search(_run([sys.executable, "-c", SPLIT_COUNT], root, {}, capture=True))
    if printed is None or splits is None:
        raise ValueError("the demo corpus count printed no count (its format changed?)")
    translations, languages, megabytes = printed.groups()
    return {
        "udhr_translations": int(translations),
        "udhr_languages": int(languages),
        "prose_mb": float(megabytes),
        **dict(zip(DEMO_SPLIT_VALUES, map(int, splits.groups()))),
    }


PIPELINE_RUN = "python -m benchmarks.data_pipeline"
# The Goldfish lines `benchmarks.data_pipeline` prints after its throughput table.
PIPELINE_RATES = re.compile(
    r"Apertus rule: (?P<apertus_drop_rate>[\d.]+) .*zero int64 product: (?P<zero_product_windows>[\d.]+)\n"
    r"- mixed hash: +(?P<mixed_drop_rate>[\d.]+)"
)


def measure_goldfish_rates(root: str, scratch: str) -> dict:
    """The README's Goldfish drop rates on real text (k = h = 50, tekken, the demo corpus), from the lines
    `benchmarks.data_pipeline` prints (its throughput is of the machine: BENCHMARKS.md).

    Returns:
      wall_seconds; apertus_drop_rate, mixed_drop_rate (fractions of the targets at positions >= h - 1,
      4 decimals as printed), zero_product_windows (the fraction of windows whose int64 product is 0, 3
      decimals).

    Raises:
      ChildProcessError: the command failed. ValueError: it printed no drop rates.
    """
    del scratch  # the benchmark writes into a temporary directory of its own
    start = time.perf_counter()
    printed = PIPELINE_RATES.search(
        _run([sys.executable, *shlex.split(PIPELINE_RUN)[1:]], root, {}, capture=True)
    )
    if printed is None:
        raise ValueError(f"`{PIPELINE_RUN}` printed no Goldfish drop rates (its format changed?)")
    return {
        "wall_seconds": round(time.perf_counter() - start, 1),
        **{k: float(v) for k, v in printed.groupdict().items()},
    }


APERTUS_ABLATION_RUN = (
    "python -m experiments.ablate --config=configs/ablations/apertus_components.py "
    "--workdir=/tmp/ablations/apertus_recipe"
)
# The reduced optimizer ablation of docs/optimizers.md: the learning-rate sweep at 154k tokens (seed 0), the
# rate shared with AdamW at 3 seeds, and at 3x the tokens (seed 0): 24 of its 72 runs.
OPTIMIZER_ABLATION = (
    "python -m experiments.ablate --config=configs/ablations/optimizers.py --workdir=/tmp/optim_ablation",
    "python -m experiments.ablate --config=configs/ablations/optimizers.py --workdir=/tmp/optim_ablation_3x",
)
OPTIMIZER_ABLATION_RUNS = (
    f"{OPTIMIZER_ABLATION[0]} --seeds=0 --variants="
    + ",".join(f"{o}_lr{r}" for o in ("adamw", "ademamix", "muon") for r in ("1e-3", "3e-3", "1e-2"))
    + ",lion_lr3e-4,lion_lr1e-3,lion_lr3e-3",
    f"{OPTIMIZER_ABLATION[0]} --seeds=0,1,2 --variants=adamw_lr3e-3,ademamix_lr3e-3,muon_lr3e-3,lion_lr1e-3",
    f"{OPTIMIZER_ABLATION[1]} --seeds=0 --variants=adamw_lr3e-3_3x,ademamix_lr3e-3_3x,muon_lr3e-3_3x,lion_lr1e-3_3x",
)


def _value_name(name: str) -> str:
    """A metric or variant name as a value name of a binding (`eval/prose/loss` -> `prose_loss`,
    `adamw_lr1e-3` -> `adamw_lr1e_3`)."""
    return re.sub(r"\W", "_", name.removeprefix("eval/"))


def ablation_values(workdir: str, baseline: str) -> dict:
    """The comparison of the ablation runs under WORKDIR as values: per variant (`_value_name`) its row of
    `apertus_jax.jobs.compare.summarize` (mean over seeds and `<metric>_spread`, half the range over seeds;
    `tokens_to_baseline` as printed in the table: "47%" or "-"), and per seed `<metric>_seed<N>` with the
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


def measure_optimizer_ablation(root: str, scratch: str) -> dict:
    """docs/optimizers.md's optimizer ablation, its reduced part (`OPTIMIZER_ABLATION_RUNS`, 24 runs); redraws
    docs/figures/optimizer_ablation.png from the 154k-token runs.

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
# The canonical hash's cost: one pass over the 154 sonnets (tekken, one row), after a warm-up on 64 tokens.
CANONICAL_COST = (
    "import timeit, numpy as np; from apertus_jax.data.goldfish_canonical import canonical_drop_mask as mask; "
    "from apertus_jax.data.sonnets import load_sonnets; from apertus_jax.tokenizers import load_tokenizer; "
    "t = load_tokenizer('tekken'); ids = np.concatenate([t.encode_document(s) for s in load_sonnets()])[None]; "
    "mask(ids[:, :64], t, 50, 13); print(ids.size, 'tokens:', *(f'{timeit.timeit(lambda: mask(ids, t, 50, h), "
    "number=1) / ids.size * 1e6:.1f} us per token at h = {h};' for h in (13, 50)))"
)
CANONICAL_COST_PRINTED = re.compile(
    r"(?P<tokens>\d+) tokens: (?P<us_h13>[\d.]+) us per token at h = 13; (?P<us_h50>[\d.]+) us per token at h = 50"
)


def _study_report(out: str) -> dict:
    """The memorization.json a study command wrote into OUT."""
    with open(os.path.join(out, "memorization.json")) as f:
        return json.load(f)


def injected_percent(workdir: str, config: dict) -> float:
    """The injected documents' share of a study run's training tokens (%, 1 decimal): the tokens of every
    occurrence its probe manifest counts (with BoD and EoD) over steps x tokens per step (`config`: the run
    config of a memorization.json)."""
    from apertus_jax.data.tokenizer import run_tokenizer  # the demo BPE: trained (cached) by the study's run

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
    canonical hash's cost on the sonnets (`CANONICAL_COST`, as it prints it).

    Returns:
      wall_seconds; plays, aligned_words; per hash and setting `<hash>_k<k>_h<h>`: identical, shared_drops,
      token_drop_rate (fractions); shared_ratio_min/max: canonical shared drops over a token hash's ("apertus",
      "mixed") at h = 4 and 13, the least and the most over both k and both token hashes; cost: tokens (the
      sonnets'), us_h13, us_h50 (microseconds per token, 1 decimal as printed), batch_ms (us_h13 x a 16 x 128
      batch, milliseconds).

    Raises:
      ChildProcessError: a command failed. ValueError: the cost command printed no cost.
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
    printed = CANONICAL_COST_PRINTED.search(
        _run([sys.executable, "-c", CANONICAL_COST], root, {}, capture=True)
    )
    if printed is None:
        raise ValueError("the canonical hash's cost command printed no cost (its format changed?)")
    cost = {
        "tokens": int(printed["tokens"]),
        "us_h13": float(printed["us_h13"]),
        "us_h50": float(printed["us_h50"]),
    }
    values["cost"] = {**cost, "batch_ms": round(cost["us_h13"] * 16 * 128 / 1000)}
    return values


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
            *PERPLEXITY_VALUES,
            *(f"unseen_languages_{k}" for k in PERPLEXITY_VALUES),
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
    "demo_corpus": Measurement(
        command=f'python -c "{CORPUS_COUNT}"\npython -c "{SPLIT_COUNT}"',
        measure=measure_demo_corpus,
        deterministic=("udhr_translations", "udhr_languages", "prose_mb", *DEMO_SPLIT_VALUES),
    ),
    "goldfish_rates": Measurement(
        command=PIPELINE_RUN,
        measure=measure_goldfish_rates,
        deterministic=("apertus_drop_rate", "zero_product_windows", "mixed_drop_rate"),
    ),
    # Too long for CI (10 and 15 minutes on 2 cores): measured here, not re-run by the tests.
    "apertus_ablation": Measurement(
        command=APERTUS_ABLATION_RUN,
        measure=measure_apertus_ablation,
        deterministic=("llama", "xielu", "ademamix", "qk_norm", "wsd", "goldfish", "full"),
        rechecked=False,
    ),
    "optimizer_ablation": Measurement(
        command="\n".join(OPTIMIZER_ABLATION_RUNS),
        measure=measure_optimizer_ablation,
        deterministic=("adamw_lr3e_3", "muon_lr3e_3", "adamw_lr3e_3_3x", "muon_lr3e_3_3x"),
        rechecked=False,
    ),
    # docs/memorization.md: 14, 11 and 2 minutes on 2 shared cores; not re-run by the tests.
    "goldfish_formats": Measurement(
        command=f'{GOLDFISH_FORMATS_RUN}\npython -c "{CANONICAL_COST}"',
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
}


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


def disagreements(name: str, fresh: dict, recorded: dict, same_machine_kind: bool) -> list[str]:
    """`VALUE RECORDED -> FRESH` for each deterministic value of measurement NAME where a fresh run disagrees
    with its record: any difference on the machine kind of the record (the runs are bitwise deterministic
    there), else a relative difference above the measurement's `other_machine_rtol` (strings: any)."""
    rtol = 0.0 if same_machine_kind else MEASUREMENTS[name].other_machine_rtol

    def close(a, b) -> bool:
        if isinstance(a, dict) and isinstance(b, dict):
            return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return abs(a - b) <= rtol * abs(b)
        return a == b

    return [
        f"{k} {recorded.get(k)} -> {fresh.get(k)}"
        for k in MEASUREMENTS[name].deterministic
        if not close(fresh.get(k), recorded.get(k))
    ]


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


def measure_all(root: str, names: list[str]) -> list[str]:
    """Runs the measurements `names` in turn, writes each one's results file as soon as it is done, then
    rewrites the bound figures of the documents under ROOT; logs each start with an ETA from the previous
    measurement times, and each deterministic value that changed. Returns the documents rewritten.

    Raises:
      ChildProcessError: a measurement's command failed (the results files written before it stay).
      KeyError, FileNotFoundError, ValueError: a bound figure names a missing value or results file.
    """
    for index, name in enumerate(names):
        measurement = MEASUREMENTS[name]
        previous = _previous(root, name)
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
        path = results.write_result(
            root, name, measurement.command, values, start_record, time.perf_counter() - start
        )
        logging.info("measure %s: wrote %s: %s", name, os.path.relpath(path, root), values)
        changed = changed_deterministic(name, previous, values)
        if changed:
            logging.warning("measure %s: deterministic values changed: %s", name, "; ".join(changed))
    rewritten = results.rewrite_documents(root)
    logging.info("measure: rewrote %s", ", ".join(os.path.relpath(p, root) for p in rewritten) or "nothing")
    return rewritten
