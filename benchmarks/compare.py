"""Ours vs MaxText and HF transformers on bench-18m, alternating in one invocation, with ratios.

    python -m benchmarks.compare [--rounds 2 --steps 15 --peers_cache DIR --env KEY=VALUE ...]

Each round runs, one after another and each in a fresh process: ours on bench-18m-apertus, the transformers
`ApertusForCausalLM` peer, ours on bench-18m-llama, the MaxText `llama2` peer (`python -m benchmarks.peers
transformers|maxtext`, which installs each peer into its own cached venv on first use; same shapes: vocab 32,000, d_model 256, 2 layers, 4 heads, batch 4 x 256 tokens, float32). Alternating keeps a
load change on the shared machine from favouring one side. The table gives the median tokens/s of the rounds
per runner, our MFU against the float32 matmul peak measured at the start, and the ratios
ours/transformers (Apertus variant) and ours/MaxText (Llama variant). The measurement is
`benchmarks.runners.compare`.
"""

from absl import flags

from benchmarks import runners
from benchmarks.peers import run as peers_run
from experiments import cli

_ROUNDS = flags.DEFINE_integer("rounds", 2, "rounds of every runner, alternating")
_STEPS = flags.DEFINE_integer("steps", 15, "timed steps per run (ours and the peers)")
_PEERS_CACHE = flags.DEFINE_string("peers_cache", peers_run.default_cache(), "the peers' venvs")
_ONLY = flags.DEFINE_string("only", "", "comma-separated runner names (default: all four)")
_OURS_ARGS = flags.DEFINE_string("ours_args", "", "extra arguments for benchmarks.train_step")
_ENV = flags.DEFINE_multi_string("env", [], "KEY=VALUE for every runner's environment (repeatable)")


def main(argv) -> None:
    del argv
    report = runners.compare(
        _ROUNDS.value, _STEPS.value, _PEERS_CACHE.value, _ONLY.value, _OURS_ARGS.value, _ENV.value
    )
    for line in report:
        print(line, flush=True)


if __name__ == "__main__":
    cli.execute(main)
