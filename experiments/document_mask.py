"""The packed-document mask on cuDNN: one layer's attention compiled for GPUs with the dense mask and causal
only (`apertus_jax.aot.document_mask`; docs/accelerators.md). Needs the `accelerators` extra.

    python -m experiments.document_mask --config=configs/runs/apertus_8b.py --target=h100:1x8

Prints one line per program: temporaries per GPU (GB = 1e9 bytes) and its cuDNN kernels, then the mask's
share. A target that is not a GPU cluster, or a missing extra, ends with one line on stderr and exit status 2.
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from absl import flags  # noqa: E402

from apertus_jax.aot.compile_targets import parse_target, target_devices  # noqa: E402
from apertus_jax.aot.document_mask import document_mask_cost  # noqa: E402
from experiments import cli  # noqa: E402

_CONFIG = cli.define_run_config("configs/runs/apertus_8b.py")
_TARGET = flags.DEFINE_string("target", "h100:1x8", "A GPU cluster KIND:HOSTSxGPUS (one row per GPU).")


def main(argv) -> None:
    del argv
    parsed = cli.parsed_config(_CONFIG)
    target = parse_target(_TARGET.value)
    if target.platform != "gpu":
        raise ValueError(
            f"--target={target.name}: the document mask is a cuDNN question; use a GPU, e.g. h100:1x8"
        )
    model, seq_len = parsed.model, parsed.data.seq_len
    cost = document_mask_cost(model, seq_len, target_devices(target))
    for name in ("masked", "causal"):
        used = ", ".join(cost["kernels"][name])
        print(f"{name}: {cost[f'{name}_gb']:.3f} GB temporaries per GPU ({used})")
    print(
        f"document mask: {cost['mask_gb']:.3f} GB per layer and row ({seq_len} tokens; the [1, 1, T, T] "
        f"{model.dtype} input alone {cost['mask_input_gb']:.3f} GB)"
    )


if __name__ == "__main__":
    cli.execute(main)
