"""Random-string canaries (Carlini et al. 2019, "The Secret Sharer"; Apertus App. H.1; docs/recipe.md section 12).

A canary is a sentence with a random secret, `"<Name> <Surname>'s account number is <d d d d d d d d d>."`:
the name (two random capitalized syllable words) keys the canary, the secret is `num_digits` random digits.
Candidates are the same sentence with other random secrets; the exposure of a trained model on a canary
(`apertus_jax.eval.exposure`) is the rank of the true sentence's log-probability among them. Everything is a
pure function of the seed.
"""

from __future__ import annotations

import dataclasses

import numpy as np

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "kr", "st", "tr")
_VOWELS = ("a", "e", "i", "o", "u", "ei", "au")
NUM_DIGITS = 9


@dataclasses.dataclass(frozen=True)
class Canary:
    """One canary: `text = prefix + secret + "."`; `secret` is space-separated digits."""

    prefix: str
    secret: str

    @property
    def text(self) -> str:
        return f"{self.prefix}{self.secret}."

    def with_secret(self, secret: str) -> Canary:
        return dataclasses.replace(self, secret=secret)


def _word(rng: np.random.Generator) -> str:
    syllables = int(rng.integers(2, 4))
    word = "".join(
        _ONSETS[rng.integers(len(_ONSETS))] + _VOWELS[rng.integers(len(_VOWELS))] for _ in range(syllables)
    )
    return word.capitalize()


def random_secret(rng: np.random.Generator, num_digits: int = NUM_DIGITS) -> str:
    """`num_digits` uniform random digits, space-separated ("4 8 1 ..."): one token per digit with most BPEs."""
    return " ".join(str(d) for d in rng.integers(0, 10, num_digits))


def make_canaries(count: int, seed: int, num_digits: int = NUM_DIGITS) -> list[Canary]:
    """`count` canaries with distinct names and secrets, a pure function of `seed`.

    Raises:
      ValueError: count < 1 or num_digits < 1.
    """
    if count < 1 or num_digits < 1:
        raise ValueError(f"canaries need count >= 1 and num_digits >= 1, got {count}, {num_digits}")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xCA7A]))
    canaries, names = [], set()
    while len(canaries) < count:
        name = f"{_word(rng)} {_word(rng)}"
        if name in names:
            continue
        names.add(name)
        canaries.append(Canary(prefix=f"{name}'s account number is ", secret=random_secret(rng, num_digits)))
    return canaries


def candidate_secrets(canary: Canary, count: int, seed: int) -> list[str]:
    """`count` random secrets of the canary's length, all different from the true one (a pure function of
    the seed and the canary)."""
    num_digits = len(canary.secret.split(" "))
    rng = np.random.default_rng(np.random.SeedSequence([seed, *canary.prefix.encode()]))
    secrets = []
    while len(secrets) < count:
        secret = random_secret(rng, num_digits)
        if secret != canary.secret:
            secrets.append(secret)
    return secrets
