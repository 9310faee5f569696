"""Boldt's token-allocation strategies at one fixed token budget (docs/recipe.md section 8).

    python -m experiments.ablate --config=configs/ablations/boldt_strategies.py --workdir=/tmp/ablations/boldt

Variants (same model, optimizer and budget of BUDGET tokens; only `data.pipeline` differs):
- `random_single`: random documents of the unfiltered pool, each at most once;
- `coherence_single`: random documents of the Coherence tier, each at most once;
- `dense_core_repeated`: a Dense-Core sample of DENSE_CORE_DOCUMENTS documents, repeated (fresh order each
  epoch) for as many epochs as the budget needs;
- `phased`: the first half like `random_single`, the second half like `dense_core_repeated`;
- `sorted`: a pool sample of SORTED_DOCUMENTS documents in ascending educational score, one pass.

The subsets are the demo corpus's German prose scored by transparent rules (`apertus_jax.prep.demo.boldt`;
Boldt's classifiers are not available on the demo data), written once under the cache directory. Models:
Llama-style (SwiGLU, no QK-norm), AdamW, cosine, no Goldfish; held-out loss on the corpus's held-out German
prose and German exam questions. `apertus_jax.data.strategy_report` shows what each variant feeds the
model (unique tokens, epochs, order of components): `notebooks/boldt_strategies.ipynb`.
"""

import os

from apertus_jax.cache import cache_dir
from apertus_jax.config.schema import base_config
from apertus_jax.models.presets import model_section
from apertus_jax.prep.demo import boldt as boldt_demo

STEPS, ROWS, SEQ_LEN = 200, 8, 64
BUDGET = STEPS * ROWS * SEQ_LEN  # 102,400 tokens
DENSE_CORE_DOCUMENTS = 10
SORTED_DOCUMENTS = 1000
SUBSETS_DIR = os.path.join(cache_dir(), "boldt_demo")


def pipelines(paths: dict[str, str], budget: int = BUDGET) -> dict[str, dict]:
    """The `data.pipeline` of each strategy over the subset files `paths` (`boldt_demo.write_demo_subsets`),
    `budget` tokens in all (the phase boundary at half of it)."""

    def jsonl(subset, **fields):
        return dict(kind="jsonl", paths=[paths[subset]], **fields)

    single = dict(epochs=1)
    dense = jsonl("dense_core", take=DENSE_CORE_DOCUMENTS)
    return {
        "random_single": dict(components=dict(pool=jsonl("pool", **single)), goldfish=dict(k=0)),
        "coherence_single": dict(components=dict(coherence=jsonl("coherence", **single)), goldfish=dict(k=0)),
        "dense_core_repeated": dict(components=dict(dense_core=dense), goldfish=dict(k=0)),
        "phased": dict(
            components=dict(pool=jsonl("pool", **single), dense_core=dense),
            stages=[
                dict(name="random", until_tokens=budget // 2, weights=dict(pool=1.0)),
                dict(name="dense_core", until_tokens=None, weights=dict(dense_core=1.0)),
            ],
            goldfish=dict(k=0),
        ),
        "sorted": dict(
            components=dict(
                pool=jsonl(
                    "pool", take=SORTED_DOCUMENTS, order="sorted", score_field="educational_quality", **single
                )
            ),
            goldfish=dict(k=0),
        ),
    }


def base(heldout_path: str):
    config = base_config()
    config.model = model_section(
        "tiny-llama",
        vocab_size=1024,
        d_model=64,
        n_heads=4,
        n_kv_heads=2,
        head_dim=16,
        mlp_hidden=128,
        max_seq_len=SEQ_LEN,
    )
    config.data.demo_tokenizer_vocab = 1024
    config.data.seq_len = SEQ_LEN
    config.train.steps = STEPS
    config.train.batch_plan = ((0, ROWS * SEQ_LEN),)
    config.optim.name = "adamw"
    config.optim.schedule = "cosine"
    config.optim.peak_lr = 3e-3
    config.optim.warmup_tokens = BUDGET // 10
    config.optim.total_tokens = BUDGET
    config.optim.clip_norm = 1.0
    config.checkpoint.every_steps = 100
    config.eval.every_steps = 50
    config.eval.heldout_paths = (f"german_heldout={heldout_path}",)
    return config


def get_ablation():
    paths = boldt_demo.write_demo_subsets(SUBSETS_DIR)
    return dict(
        base=base(paths["heldout"]),
        variants={name: {"data.pipeline": pipeline} for name, pipeline in pipelines(paths).items()},
        seeds=(0, 1, 2),
        baseline="random_single",
    )
