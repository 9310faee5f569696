"""The measured ablations of docs/ablations.md and docs/optimizers.md: the Apertus recipe, the Boldt data
strategies and the optimizers, from the comparison of their runs (`apertus_jax.studies.ablations.compare`).

    values = measure_apertus_ablation(REPO, scratch)

A variant's values are named by `_value_name` (`adamw_lr1e-3` -> `adamw_lr1e_3`).
"""

from __future__ import annotations

import os
import re

from apertus_jax.data.run_tokenizer import run_tokenizer
from apertus_jax.data.strategy_report import strategy_report
from apertus_jax.eval.in_loop import heldout_sets
from apertus_jax.records.runs import RunRecords, load_runs, run_dirs
from apertus_jax.studies.ablations import ablate as ablations
from apertus_jax.studies.ablations import compare
from tools.measure import commands

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
    `apertus_jax.studies.ablations.compare.summarize` (mean over seeds and `<metric>_spread`, half the range over seeds;
    `tokens_to_baseline` as the table prints it: "47%", or "-" when never reached), and per seed `<metric>_seed<N>` with the
    paired difference to the baseline's run of that seed as `<metric>_vs_baseline_seed<N>` (final eval; the
    metrics of the table and `heldout_loss`)."""
    runs = load_runs([workdir])
    values: dict = {}
    for row in compare.summarize(runs, baseline):
        reach = row.pop("tokens_to_baseline")
        named = {_value_name(k.replace(" spread", "_spread")): v for k, v in row.items() if k != "variant"}
        named["tokens_to_baseline"] = "-" if reach is None else f"{100 * reach:.0f}%"
        values[_value_name(row["variant"])] = named

    def finals(run: RunRecords) -> dict:
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


def measure_apertus_ablation(root: str, scratch: str) -> dict:
    """docs/ablations.md's Apertus recipe ablation (21 runs), its tables from the comparison of its runs
    (`ablation_values`); redraws docs/figures/apertus_recipe_ablation.png.

    Returns:
      wall_seconds; per variant the values of `ablation_values` (baseline "llama").

    Raises:
      ChildProcessError: the command failed.
    """
    wall = commands.documented(APERTUS_ABLATION_RUN, root, scratch, {})
    workdir = os.path.join(scratch, "ablations", "apertus_recipe")
    commands.figure(os.path.join(workdir, "comparison.png"), root, "apertus_recipe_ablation.png")
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
        run = parsed
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
    wall = commands.documented(BOLDT_ABLATION_RUN, root, scratch, {})
    workdir = os.path.join(scratch, "ablations", "boldt")
    commands.figure(os.path.join(workdir, "comparison.png"), root, "boldt_strategies_ablation.png")
    final = commands.eval_records(os.path.join(workdir, "random_single", "seed0"))[-1]
    return {
        "wall_seconds": round(wall, 1),
        "runs": len(run_dirs([workdir])),
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
    wall = sum(commands.documented(line, root, scratch, {}) for line in OPTIMIZER_ABLATION_RUNS)
    short, long = (os.path.join(scratch, name) for name in ("optim_ablation", "optim_ablation_3x"))
    commands.figure(os.path.join(short, "comparison.png"), root, "optimizer_ablation.png")
    return {
        "wall_seconds": round(wall, 1),
        **ablation_values(short, "adamw_lr3e-3"),
        **ablation_values(long, "adamw_lr3e-3_3x"),
    }
