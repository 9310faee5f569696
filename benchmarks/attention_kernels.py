"""One layer's attention, forward and backward, through each kernel with the packed-document mask: time per
call, temporaries and error against the float32 reference, on one accelerator.

    python -m benchmarks.attention_kernels [--preset apertus-8b --seq 4096 --rows 1 --max_document N
        --kernels xla,cudnn_mask,... --json PATH] [--dry_run]

Kernels (q/k/v in bf16, the preset's head counts, scale `head_dim ** -0.5`):
  xla           `apertus_jax.models.attention.xla_attention` with the document mask (the "xla" kernel)
  cudnn_mask    `jax.nn.dot_product_attention(implementation="cudnn")` with the boolean document mask, which
                jax hands to cuDNN as a dense `[B, 1, T, T]` bias (the model's "cudnn" kernel)
  cudnn_causal  cuDNN causal only (`is_causal=True`): no document boundaries, so not the rule; the floor
                the document mask's cost is measured against
  cudnn_packed  jax's internal cuDNN wrapper (`jax._src.cudnn.fused_attention_stablehlo`, private API) in its
                packed layout: per row the documents' start offsets `[B, M + 1]` and lengths `[B, M]`, M the
                most documents in any row of this batch, causal within each document (mask type
                `PADDING_CAUSAL`; Hopper and later)
Rows pack demo-corpus document lengths, the last ~5% padding (`benchmarks.packed_rows`); the measurement is
`benchmarks.kernel_timing`.
Time: median of `--calls` blocked calls of the jitted gradient of `sum(out * cotangent)` with respect to q, k
and v (forward and backward), after two warm-up calls. Error: max |x - reference| over the real (non-padding)
positions divided by max |reference|, for the output and dq/dk/dv; the reference is `xla_attention` on the same
bf16 values in float32 (block by block, `blocked_xla_attention`, above 8,192 tokens per row). A kernel that
fails to build or run is reported with its error's first line, and the others still run. `--dry_run` runs the
xla kernel at tiny sizes on any backend (CPU CI).
"""

import json

from absl import flags

from apertus_jax.models.presets import PRESET_NAMES
from benchmarks.kernel_timing import KERNELS, run
from experiments import cli

_PRESET = flags.DEFINE_enum("preset", "apertus-8b", PRESET_NAMES, "model preset whose head counts are used")
_SEQ = flags.DEFINE_integer("seq", 4096, "tokens per row")
_ROWS = flags.DEFINE_integer("rows", 1, "rows of the batch")
_MAX_DOCUMENT = flags.DEFINE_integer("max_document", 0, "cap of a document's length; 0: seq / 3")
_KERNELS = flags.DEFINE_list("kernels", list(KERNELS), "kernels to run, of " + ", ".join(KERNELS))
_CALLS = flags.DEFINE_integer("calls", 20, "timed calls per kernel")
_JSON = flags.DEFINE_string("json", "", "also write the results as JSON to this path")
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "the xla kernel at tiny sizes (any backend)")


def main(argv) -> None:
    del argv
    if _DRY_RUN.value:
        report = run("tiny", 256, 2, 2, kernels=("xla",))
    else:
        report = run(
            _PRESET.value, _SEQ.value, _ROWS.value, _CALLS.value, _KERNELS.value, _MAX_DOCUMENT.value
        )
    for name, r in report["kernels"].items():
        if "error" in r:
            print(f"{name:13s} failed: {r['error']}")
        else:
            errors = " ".join(f"{k}={v:.2g}" for k, v in r["relative_error"].items())
            print(f"{name:13s} {r['ms']:8.3f} ms fwd+bwd  temporaries {r['temp_gb']:.3f} GB  error {errors}")
    if _JSON.value:
        with open(_JSON.value, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    cli.execute(main)
