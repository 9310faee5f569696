"""The parameter counts of the apertus-8b and apertus-1.5b presets and the tekken tokenizer's vocabulary size
(docs/configs.md, docs/usage.md), printed as one JSON object.

    python -m tools.measure.param_counts

Prints {apertus_8b_params, apertus_1p5b_params (`flops.param_count`, from shapes alone), tekken_vocab_size};
the `param_counts` measurement reads it.
"""

import json

from apertus_jax.models import flops, get_config
from apertus_jax.tokenizers import load_tokenizer


def counts() -> dict:
    """The counts this module prints (module docstring)."""
    return {
        "apertus_8b_params": flops.param_count(get_config("apertus-8b")),
        "apertus_1p5b_params": flops.param_count(get_config("apertus-1.5b")),
        "tekken_vocab_size": load_tokenizer("tekken").vocab_size,
    }


if __name__ == "__main__":
    print(json.dumps(counts()))
