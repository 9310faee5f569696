"""The canonical Goldfish hash's cost (docs/memorization.md): one pass over the 154 sonnets (tekken, one row)
after a warm-up on 64 tokens, printed as one JSON object.

    python -m tools.measure.canonical_cost

Prints {tokens (the sonnets'), us_h13, us_h50 (microseconds per token at k = 50 and h = 13, 50; 1 decimal)};
the `goldfish_formats` measurement reads it.
"""

import json
import timeit

import numpy as np

from apertus_jax.data.goldfish.canonical import canonical_drop_mask
from apertus_jax.data.memorization.sonnets import load_sonnets
from apertus_jax.tokenizers import load_tokenizer


def cost() -> dict:
    """The cost this module prints (module docstring)."""
    tokenizer = load_tokenizer("tekken")
    ids = np.concatenate([tokenizer.encode_document(s) for s in load_sonnets()])[None]
    canonical_drop_mask(ids[:, :64], tokenizer, 50, 13)
    values = {"tokens": int(ids.size)}
    for h in (13, 50):
        seconds = timeit.timeit(lambda h=h: canonical_drop_mask(ids, tokenizer, 50, h), number=1)
        values[f"us_h{h}"] = round(seconds / ids.size * 1e6, 1)
    return values


if __name__ == "__main__":
    print(json.dumps(cost()))
