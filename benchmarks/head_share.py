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
default 4 x 256 tokens, the shapes of the peer (`benchmarks.runners.TOKENS`).

The ratio ours/transformers is step_peer / step_ours. Keeping our vocabulary part at what it measures, a
ratio R leaves `step_peer / R - vocab_ours` milliseconds for our body; the report prints that budget next
to our body now and the body's floor: the FLOPs of the small-vocabulary step
(`apertus_jax.models.flops`) at the float32 matmul peak measured at the start (`benchmarks.matmul`).
The measurement is `benchmarks.runners.head_share`.
"""

from absl import flags

from benchmarks import runners
from benchmarks.peers import run as peers_run
from experiments import cli

_ROUNDS = flags.DEFINE_integer("rounds", 3, "rounds of every run, alternating")
_STEPS = flags.DEFINE_integer("steps", 15, "timed steps per run")
_SMALL_VOCAB = flags.DEFINE_integer("small_vocab", 512, "the vocabulary of the body-only runs")
_TARGET = flags.DEFINE_float("target", 1.5, "the ratio the budget is computed for")
_PEERS_CACHE = flags.DEFINE_string("peers_cache", peers_run.default_cache(), "the peers' venvs")
_ENV = flags.DEFINE_multi_string("env", [], "KEY=VALUE for every runner's environment (repeatable)")


def main(argv) -> None:
    del argv
    report = runners.head_share(
        _ROUNDS.value, _STEPS.value, _SMALL_VOCAB.value, _TARGET.value, _PEERS_CACHE.value, _ENV.value
    )
    for line in report:
        print(line, flush=True)


if __name__ == "__main__":
    cli.execute(main)
