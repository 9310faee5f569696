"""Ours and the peers on bench-18m, each run in a fresh process: the measurements of `benchmarks.compare`
(ours vs MaxText and HF transformers, with ratios) and `benchmarks.head_share` (the vocabulary-sized part of
the Apertus step, ours and the transformers peer's).

Ours is `python -m benchmarks.train_step`, a peer `python -m benchmarks.peers PEER`; every runner of an
invocation gets the same added environment (`parse_env`). `compare` and `head_share` yield their report line
by line as the runs finish (a round takes minutes), after checking every argument first.
"""

import json
import math
import os
import re
import statistics
import subprocess
import sys
from collections.abc import Iterator, Sequence

from apertus_jax.models import flops
from apertus_jax.models.presets import get_config
from benchmarks import matmul
from benchmarks.peers import run as peers_run

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# (runner name, how to run it); ours are model presets, peers are `benchmarks.peers` arguments.
RUNNERS = (
    ("ours-apertus", "bench-18m-apertus"),
    ("transformers", "transformers"),
    ("ours-llama", "bench-18m-llama"),
    ("maxtext", "maxtext"),
)
RATIOS = (("ours-apertus", "transformers"), ("ours-llama", "maxtext"))
HEAD_SHARE_PRESET = "bench-18m-apertus"
TOKENS = peers_run.BENCH_18M["batch"] * peers_run.BENCH_18M["seq"]  # per step, ours and the peers
FULL_VOCAB = peers_run.BENCH_18M["vocab"]


def run_ours(
    preset: str, steps: int, peak_gflops: float, extra_args: list[str], env: dict[str, str] | None = None
) -> float:
    """tokens/s of `python -m benchmarks.train_step` in a fresh process (`env` added to its environment).

    Raises:
      RuntimeError: the subprocess failed (its stderr tail is in the message).
    """
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.train_step",
        f"--config={preset}",
        f"--steps={steps}",
        f"--peak_gflops={peak_gflops}",
        "--json",
        *extra_args,
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, cwd=REPO_ROOT, env={**os.environ, **(env or {})}
    )
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["tokens_per_s"]


def run_peer(
    peer: str,
    steps: int,
    cache: str,
    extra_args: tuple[str, ...] | list[str] = (),
    env: dict[str, str] | None = None,
) -> float:
    """tokens/s printed by `python -m benchmarks.peers PEER` ("PEER tokens_per_s=N ...") in a fresh process,
    with `extra_args` appended to its command line and `env` added to its environment.

    Raises:
      RuntimeError: the peer failed or printed no throughput.
    """
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.peers",
        peer,
        f"--steps={steps}",
        f"--cache={cache}",
        *extra_args,
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, cwd=REPO_ROOT, env={**os.environ, **(env or {})}
    )
    match = re.search(r"tokens_per_s=([0-9.]+)", proc.stdout)
    if proc.returncode or not match:
        raise RuntimeError(
            f"{' '.join(cmd)} failed (rc {proc.returncode}): {proc.stdout[-500:]} {proc.stderr[-1500:]}"
        )
    return float(match.group(1))


def parse_env(assignments: list[str]) -> dict[str, str]:
    """`["KEY=VALUE", ...]` -> dict; the environment every runner of an invocation gets (ours and the peers).

    Raises:
      ValueError: an item without "=" or with an empty key.
    """
    env = {}
    for item in assignments:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(
                f"--env {item!r} is not KEY=VALUE (e.g. --env GLIBC_TUNABLES=glibc.malloc.hugetlb=1)"
            )
        env[key] = value
    return env


def format_table(results: dict[str, list[float]], peak_gflops: float) -> str:
    """Markdown table: runner, median tokens/s, per-round values, MFU (ours), ratio vs its peer."""
    ratio_of = dict(RATIOS)
    lines = [
        "| runner | tokens/s (median) | rounds | MFU vs f32 peak | ratio |",
        "| --- | ---: | --- | ---: | ---: |",
    ]
    for name, spec in RUNNERS:
        values = results.get(name)
        if not values:
            continue
        median = statistics.median(values)
        mfu = ""
        if name.startswith("ours"):
            per_token = flops.train_flops_per_token(get_config(spec), 256)
            mfu = f"{100 * median * per_token / (peak_gflops * 1e9):.1f}%"
        ratio = ""
        if name in ratio_of and results.get(ratio_of[name]):
            ratio = f"{median / statistics.median(results[ratio_of[name]]):.2f}x vs {ratio_of[name]}"
        rounds = ", ".join(f"{v:.0f}" for v in values)
        lines.append(f"| {name} | {median:.0f} | {rounds} | {mfu} | {ratio} |")
    return "\n".join(lines)


def compare(
    rounds: int, steps: int, peers_cache: str, only: str = "", ours_args: str = "", env: Sequence[str] = ()
) -> Iterator[str]:
    """The report of `python -m benchmarks.compare`: the float32 matmul peak, one line per run as it finishes
    (`rounds` rounds of `RUNNERS`, alternating, `steps` timed steps each), then `format_table`.

    Args:
      only: comma-separated runner names (empty: all of `RUNNERS`).
      ours_args: extra arguments of `benchmarks.train_step`, space-separated.
      env: `KEY=VALUE` items added to every runner's environment.

    Raises:
      ValueError (at the first line, before anything runs): `rounds` or `steps` < 1, an unknown runner in
        `only`, a malformed `env` item.
      RuntimeError: a runner failed.
    """
    if rounds < 1 or steps < 1:
        raise ValueError(f"--rounds={rounds} and --steps={steps} must both be >= 1")
    names = [name for name, _ in RUNNERS]
    selected = set(only.split(",")) if only else set(names)
    if selected - set(names):
        raise ValueError(f"--only: unknown runner(s) {sorted(selected - set(names))}; choose from {names}")
    added_env = parse_env(env)
    peak_gflops = matmul.matmul_gflops("float32")
    yield f"float32 matmul peak: {peak_gflops:.1f} GFLOP/s; runner environment: {added_env or 'as inherited'}"
    results: dict[str, list[float]] = {}
    for round_index in range(rounds):
        for name, spec in RUNNERS:
            if name not in selected:
                continue
            if name.startswith("ours"):
                value = run_ours(spec, steps, peak_gflops, ours_args.split(), added_env)
            else:
                value = run_peer(spec, steps, peers_cache, env=added_env)
            results.setdefault(name, []).append(value)
            yield f"round {round_index + 1} {name}: {value:.0f} tokens/s"
    yield format_table(results, peak_gflops)


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


def format_head_share(parts: dict[str, dict], small_vocab: int, body_floor_ms: float, target: float) -> str:
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


def head_share(
    rounds: int, steps: int, small_vocab: int, target: float, peers_cache: str, env: Sequence[str] = ()
) -> Iterator[str]:
    """The report of `python -m benchmarks.head_share`: the float32 matmul peak, one line per run as it
    finishes (`rounds` rounds of ours and the transformers peer on `HEAD_SHARE_PRESET` at `FULL_VOCAB` and at
    `small_vocab`, `steps` timed steps each), then `format_head_share` for the ratio `target`.

    The body's floor is the FLOPs of our small-vocabulary step at the measured peak.

    Raises:
      ValueError (at the first line, before anything runs): a malformed `env` item, `rounds` or `steps` < 1,
        `small_vocab` outside [1, FULL_VOCAB), `target` not a finite ratio > 0.
      RuntimeError: a runner failed.
    """
    added_env = parse_env(env)
    if rounds < 1 or steps < 1:
        raise ValueError(f"--rounds={rounds} and --steps={steps} must both be >= 1")
    if not 1 <= small_vocab < FULL_VOCAB:
        raise ValueError(f"--small_vocab={small_vocab} must be in [1, {FULL_VOCAB})")
    if not (math.isfinite(target) and target > 0):
        raise ValueError(f"--target={target} must be a finite ratio > 0")
    peak_gflops = matmul.matmul_gflops("float32")
    yield f"float32 matmul peak: {peak_gflops:.1f} GFLOP/s; runner environment: {added_env or 'as inherited'}"
    results: dict[tuple[str, int], list[float]] = {}
    for round_index in range(rounds):
        for vocab in (FULL_VOCAB, small_vocab):
            for runner in ("ours", "transformers"):
                if runner == "ours":
                    value = run_ours(
                        HEAD_SHARE_PRESET, steps, peak_gflops, [f"--vocab_size={vocab}"], added_env
                    )
                else:
                    value = run_peer("transformers", steps, peers_cache, [f"--vocab={vocab}"], added_env)
                results.setdefault((runner, vocab), []).append(value)
                yield f"round {round_index + 1} {runner} vocab {vocab}: {value:.0f} tokens/s"
    small_config = get_config(HEAD_SHARE_PRESET, vocab_size=small_vocab)
    seq = peers_run.BENCH_18M["seq"]
    floor_ms = 1e3 * flops.train_flops_per_token(small_config, seq) * TOKENS / (peak_gflops * 1e9)
    yield format_head_share(decompose(results, small_vocab), small_vocab, floor_ms, target)
