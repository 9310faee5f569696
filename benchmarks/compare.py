"""Ours vs MaxText and HF transformers on bench-18m, alternating in one invocation, with ratios.

    python -m benchmarks.compare [--rounds 2 --steps 15 --peers_cache DIR --env KEY=VALUE ...]

Each round runs, one after another and each in a fresh process: ours on bench-18m-apertus, the transformers
`ApertusForCausalLM` peer, ours on bench-18m-llama, the MaxText `llama2` peer (`python -m benchmarks.peers
transformers|maxtext`, which installs each peer into its own cached venv on first use; same shapes: vocab 32,000, d_model 256, 2 layers, 4 heads, batch 4 x 256 tokens, float32). Alternating keeps a
load change on the shared machine from favouring one side. The table gives the median tokens/s of the rounds
per runner, our MFU against the float32 matmul peak measured at the start, and the ratios
ours/transformers (Apertus variant) and ours/MaxText (Llama variant).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

from apertus_jax.models import flops
from apertus_jax.models.presets import get_config
from benchmarks import peak
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


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=15, help="timed steps per run (ours and the peers)")
    parser.add_argument("--peers_cache", default=peers_run.default_cache(), help="the peers' venvs")
    parser.add_argument("--only", default="", help="comma-separated runner names (default: all four)")
    parser.add_argument("--ours_args", default="", help="extra arguments for benchmarks.train_step")
    parser.add_argument(
        "--env", action="append", default=[], help="KEY=VALUE for every runner's environment (repeatable)"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.steps < 1:
        parser.error(f"--rounds={args.rounds} and --steps={args.steps} must both be >= 1")
    names = {name for name, _ in RUNNERS}
    selected = set(args.only.split(",")) if args.only else names
    if selected - names:
        parser.error(
            f"--only: unknown runner(s) {sorted(selected - names)}; choose from {[n for n, _ in RUNNERS]}"
        )
    try:
        env = parse_env(args.env)
    except ValueError as err:
        parser.error(str(err))
    peak_gflops = peak.matmul_gflops("float32")
    print(
        f"float32 matmul peak: {peak_gflops:.1f} GFLOP/s; runner environment: {env or 'as inherited'}",
        flush=True,
    )
    results: dict[str, list[float]] = {}
    for round_index in range(args.rounds):
        for name, spec in RUNNERS:
            if name not in selected:
                continue
            if name.startswith("ours"):
                value = run_ours(spec, args.steps, peak_gflops, args.ours_args.split(), env)
            else:
                value = run_peer(spec, args.steps, args.peers_cache, env=env)
            results.setdefault(name, []).append(value)
            print(f"round {round_index + 1} {name}: {value:.0f} tokens/s", flush=True)
    print(format_table(results, peak_gflops))


if __name__ == "__main__":
    main()
