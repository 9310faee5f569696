"""How much of the bench-18m Apertus step is its vocabulary-sized part, ours and the transformers peer's,
and what that leaves of the ratio between the two.

    python -m benchmarks.head_share [--rounds 3 --steps 15 --small_vocab 512 --env KEY=VALUE ...]

Each round runs, each in a fresh process, one after another: ours (`benchmarks.train_step`) and the
transformers `ApertusForCausalLM` peer (`benchmarks.peers transformers`) on bench-18m-apertus at its 32,000
vocabulary, then both again at `--small_vocab` with the same body (2 layers, d_model 256, 4 x 256 tokens,
float32, AdamW). Per runner, step(V) is tokens / tokens_per_s (median of the rounds); the vocabulary part is
step(32,000) - step(small): embedding lookup and gradient, lm_head, softmax cross-entropy and their
optimizer update. The body is step(small); it still holds those parts at the small vocabulary (a few
milliseconds), so the vocabulary part is slightly underestimated. Ours runs `benchmarks.train_step` at its
default 4 x 256 tokens, the shapes of the peer (`TOKENS`).

The ratio ours/transformers is step_peer / step_ours. Keeping our vocabulary part at what it measures, a
ratio R leaves `step_peer / R - vocab_ours` milliseconds for our body; the report prints that budget next
to our body now and the body's floor: the FLOPs of the small-vocabulary step
(`apertus_jax.models.flops`) at the float32 matmul peak measured at the start (`benchmarks.peak`).
"""

import argparse
import math
import statistics

from apertus_jax.models import flops
from apertus_jax.models.presets import get_config
from benchmarks import compare, peak
from benchmarks.peers import run as peers_run

PRESET = "bench-18m-apertus"
TOKENS = peers_run.BENCH_18M["batch"] * peers_run.BENCH_18M["seq"]
FULL_VOCAB = peers_run.BENCH_18M["vocab"]


def decompose(tokens_per_s: dict[tuple[str, int], list[float]], small_vocab: int) -> dict[str, dict]:
    """Per runner ("ours", "transformers"): median step ms at both vocabularies, the vocabulary part, the body.

    Args:
      tokens_per_s: {(runner, vocab): tokens/s of each round}.
      small_vocab: the small vocabulary the rounds ran at.

    Returns:
      {runner: {"full_ms", "small_ms", "vocab_ms", "body_ms"}}: median step times over the rounds, in
      milliseconds per step of `TOKENS` tokens.

    Raises:
      KeyError: a runner lacks one of the two vocabularies.
    """
    out = {}
    for runner in ("ours", "transformers"):
        full, small = (
            statistics.median(1e3 * TOKENS / value for value in tokens_per_s[(runner, v)])
            for v in (FULL_VOCAB, small_vocab)
        )
        out[runner] = {"full_ms": full, "small_ms": small, "vocab_ms": full - small, "body_ms": small}
    return out


def format_report(parts: dict[str, dict], small_vocab: int, body_floor_ms: float, target: float) -> str:
    """Markdown table of `decompose`'s result, then the ratio, the body budget for `target` and the ceiling.

    Args:
      parts: `decompose`'s result (milliseconds per step).
      small_vocab: the small vocabulary, for the column header.
      body_floor_ms: FLOPs of our small-vocabulary step at the measured matmul peak, in milliseconds.
      target: the ratio ours/transformers the budget is computed for (finite, > 0).

    Returns:
      the report; when our vocabulary part alone exceeds the peer's step / `target`, it says that `target` is
      out of reach whatever the body does, instead of printing a negative budget.
    """
    lines = [
        f"| runner | step ms, vocab {FULL_VOCAB:,} | step ms, vocab {small_vocab:,} (body) "
        "| vocabulary part ms | vocabulary share |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for runner, p in parts.items():
        lines.append(
            f"| {runner} | {p['full_ms']:.0f} | {p['small_ms']:.0f} | {p['vocab_ms']:.0f} "
            f"| {100 * p['vocab_ms'] / p['full_ms']:.0f}% |"
        )
    ours, peer = parts["ours"], parts["transformers"]
    budget = peer["full_ms"] / target - ours["vocab_ms"]
    lines += [
        "",
        f"ratio ours/transformers: {peer['full_ms'] / ours['full_ms']:.2f}x; "
        f"vocabulary part ours/transformers: {ours['vocab_ms'] / peer['vocab_ms']:.2f}; "
        f"body transformers/ours: {peer['body_ms'] / ours['body_ms']:.2f}x",
        (
            f"for {target:.2f}x our body may take {budget:.0f} ms; it takes {ours['body_ms']:.0f} ms; "
            if budget > 0
            else f"{target:.2f}x is out of reach: our vocabulary part alone takes more than "
            f"{peer['full_ms'] / target:.0f} ms; our body takes {ours['body_ms']:.0f} ms; "
        )
        + f"its floor (FLOPs at the measured matmul peak) is {body_floor_ms:.0f} ms",
        f"ceiling with our body at its floor: {peer['full_ms'] / (ours['vocab_ms'] + body_floor_ms):.2f}x",
    ]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=15, help="timed steps per run")
    parser.add_argument("--small_vocab", type=int, default=512, help="the vocabulary of the body-only runs")
    parser.add_argument("--target", type=float, default=1.5, help="the ratio the budget is computed for")
    parser.add_argument("--peers_cache", default=peers_run.default_cache(), help="the peers' venvs")
    parser.add_argument(
        "--env", action="append", default=[], help="KEY=VALUE for every runner's environment (repeatable)"
    )
    args = parser.parse_args(argv)
    try:
        env = compare.parse_env(args.env)
    except ValueError as err:
        parser.error(str(err))
    if args.rounds < 1 or args.steps < 1:
        parser.error(f"--rounds={args.rounds} and --steps={args.steps} must both be >= 1")
    if not 1 <= args.small_vocab < FULL_VOCAB:
        parser.error(f"--small_vocab={args.small_vocab} must be in [1, {FULL_VOCAB})")
    if not (math.isfinite(args.target) and args.target > 0):
        parser.error(f"--target={args.target} must be a finite ratio > 0")
    peak_gflops = peak.matmul_gflops("float32")
    print(
        f"float32 matmul peak: {peak_gflops:.1f} GFLOP/s; runner environment: {env or 'as inherited'}",
        flush=True,
    )
    results: dict[tuple[str, int], list[float]] = {}
    for round_index in range(args.rounds):
        for vocab in (FULL_VOCAB, args.small_vocab):
            for runner in ("ours", "transformers"):
                if runner == "ours":
                    value = compare.run_ours(PRESET, args.steps, peak_gflops, [f"--vocab_size={vocab}"], env)
                else:
                    value = compare.run_peer(
                        "transformers", args.steps, args.peers_cache, [f"--vocab={vocab}"], env
                    )
                results.setdefault((runner, vocab), []).append(value)
                print(f"round {round_index + 1} {runner} vocab {vocab}: {value:.0f} tokens/s", flush=True)
    small_config = get_config(PRESET, vocab_size=args.small_vocab)
    seq = peers_run.BENCH_18M["seq"]
    floor_ms = 1e3 * flops.train_flops_per_token(small_config, seq) * TOKENS / (peak_gflops * 1e9)
    print(format_report(decompose(results, args.small_vocab), args.small_vocab, floor_ms, args.target))


if __name__ == "__main__":
    main()
