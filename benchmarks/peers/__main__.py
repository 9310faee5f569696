"""CLI: `python -m benchmarks.peers maxtext|transformers|all [--cache DIR --steps 15 ...]`; one
`PEER tokens_per_s=N ...` line per peer (`benchmarks.peers.run.run_peers`)."""

from absl import flags

from benchmarks.peers import run
from experiments import cli

_CACHE = flags.DEFINE_string("cache", run.default_cache(), "where the peers' venvs live")
_STEPS = flags.DEFINE_integer("steps", 15, "timed steps")
_MAXTEXT_WARMUP = flags.DEFINE_integer("maxtext_warmup", 5, "untimed MaxText steps (compile)")
_TRANSFORMERS_WARMUP = flags.DEFINE_integer("transformers_warmup", 2, "untimed transformers steps")
_VOCAB = flags.DEFINE_integer("vocab", run.BENCH_18M["vocab"], "transformers only: the vocabulary size")
_MAXTEXT_PYTHON = flags.DEFINE_string("maxtext_python", "", "Python >= 3.12 for MaxText (default: found)")


def main(argv) -> None:
    if len(argv) != 2:
        raise ValueError(
            f"name one peer: {' | '.join((*run.PEERS, 'all'))} (e.g. python -m benchmarks.peers all)"
        )
    lines = run.run_peers(
        argv[1],
        _CACHE.value,
        _STEPS.value,
        _MAXTEXT_WARMUP.value,
        _TRANSFORMERS_WARMUP.value,
        _VOCAB.value,
        _MAXTEXT_PYTHON.value,
    )
    for line in lines:
        print(line, flush=True)


if __name__ == "__main__":
    cli.execute(main)
