"""Where a train step's time goes: a `jax.profiler` trace of the compiled step, summed per XLA op and part.

    python -m benchmarks.profile --config=bench-18m-apertus [--steps 3 --top 15 --batch 4 --seq 256]

Every op event of the XLA CPU threads is attributed to one part of the model by its HLO instruction:
  optimizer  -- outside the gradient computation (neither `jvp(` nor the microbatch loop's `while/body` in the
                op's name stack): clip, AdamW/AdEMAMix update;
  lm_head+loss -- any operand or result with a vocab-sized dimension (logits matmuls, log-softmax, the
                  embedding gather/scatter);
  attention  -- a `[.., T, T]` operand or result (scores, softmax, values) or a q/k/v/o einsum;
  mlp        -- an `mlp_hidden`-sized dimension;
  other      -- norms, RoPE, residuals, copies.
Shares are of the summed thread time (all cores), which a busy machine inflates less than wall time.
"""

import collections
import glob
import re
import tempfile

import jax
from absl import flags

from benchmarks.step import build
from experiments import cli

_CONFIG = flags.DEFINE_string("config", "bench-18m-apertus", "model preset (apertus_jax.models.presets)")
_STEPS = flags.DEFINE_integer("steps", 3, "traced steps")
_TOP = flags.DEFINE_integer("top", 15, "ops listed")
_BATCH = flags.DEFINE_integer("batch", 4, "rows per step")
_SEQ = flags.DEFINE_integer("seq", 256, "tokens per row")
_DTYPE = flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"], "compute dtype")
_OPTIMIZER = flags.DEFINE_enum("optimizer", "adamw", ["adamw", "ademamix"], "optimizer")

_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = (\S+) ")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_ATTENTION_EINSUMS = ("btd,dnh->btnh", "btd,dkh->btkh", "btnh,nhd->btd", "btkgh,bskh", "bkgts,bskh")


def hlo_parts(hlo_text: str, vocab: int, mlp_hidden: int, seq: int) -> dict[str, str]:
    """HLO instruction name -> part ("optimizer", "lm_head+loss", "attention", "mlp", "other")."""
    vocab_dim = re.compile(rf"[\[,]{vocab}[\],]")
    mlp_dim = re.compile(rf"[\[,]{mlp_hidden}[\],]")
    scores_dim = re.compile(rf",{seq},{seq}\]")
    parts = {}
    for line in hlo_text.splitlines():
        match = _INSTRUCTION.match(line)
        if not match:
            continue
        op_name = (_OP_NAME.search(line) or [None, ""])[1]
        # The shapes of the result and the operands appear before the metadata.
        shapes = line.split("metadata=")[0]
        if "jvp(" not in op_name and "while/body" not in op_name and "jit(" in op_name:
            part = "optimizer"
        elif vocab_dim.search(shapes):
            part = "lm_head+loss"
        elif scores_dim.search(shapes) or any(e in op_name for e in _ATTENTION_EINSUMS):
            part = "attention"
        elif mlp_dim.search(shapes):
            part = "mlp"
        else:
            part = "other"
        parts[match.group(1)] = part
    return parts


def _operand_shapes(hlo_text: str) -> str:
    """HLO text where each operand name is followed by its shape, so that shape tests see the operands."""
    shapes = {m.group(1): m.group(2) for m in map(_INSTRUCTION.match, hlo_text.splitlines()) if m}
    return re.sub(r"%([\w.\-]+)(?=[,)])", lambda m: f"%{m.group(1)}{shapes.get(m.group(1), '')}", hlo_text)


def profile(
    config_name: str,
    steps: int = 3,
    batch: int = 4,
    seq: int = 256,
    dtype: str = "float32",
    optimizer: str = "adamw",
) -> tuple[dict[str, float], list[tuple[str, str, float]]]:
    """Runs `steps` traced steps after 2 untimed ones.

    Returns ({part: ms of thread time per step}, [(op, part, ms per step)] sorted by time, descending).
    """
    model_config, step, state, device_batch = build(config_name, batch, seq, dtype, optimizer)
    params, opt_state = state["params"], state["opt_state"]
    hlo = step.lower(params, opt_state, device_batch, None).compile().as_text()
    parts = hlo_parts(_operand_shapes(hlo), model_config.vocab_size, model_config.mlp_hidden, seq)
    for _ in range(2):
        params, opt_state, metrics = step(params, opt_state, device_batch, None)
    jax.block_until_ready(metrics)
    with tempfile.TemporaryDirectory() as trace_dir:
        with jax.profiler.trace(trace_dir):
            for _ in range(steps):
                params, opt_state, metrics = step(params, opt_state, device_batch, None)
                jax.block_until_ready((params, opt_state, metrics))
        trace = jax.profiler.ProfileData.from_file(
            glob.glob(f"{trace_dir}/**/*.xplane.pb", recursive=True)[0]
        )
        per_op = collections.Counter()
        for plane in trace.planes:
            for line in plane.lines:
                for event in line.events:
                    if event.name in parts:
                        per_op[event.name] += event.duration_ns / 1e6 / steps
    per_part = collections.Counter()
    for op, ms in per_op.items():
        per_part[parts[op]] += ms
    return dict(per_part), [(op, parts[op], ms) for op, ms in per_op.most_common()]


def main(argv) -> None:
    del argv
    per_part, per_op = profile(
        _CONFIG.value, _STEPS.value, _BATCH.value, _SEQ.value, _DTYPE.value, _OPTIMIZER.value
    )
    total = sum(per_part.values())
    print(f"{_CONFIG.value} {_DTYPE.value} {_OPTIMIZER.value}: {total:.0f} ms of XLA thread time per step")
    for part, ms in sorted(per_part.items(), key=lambda kv: -kv[1]):
        print(f"  {part:<14} {ms:8.1f} ms  {100 * ms / total:5.1f}%")
    print(f"top {_TOP.value} ops:")
    for op, part, ms in per_op[: _TOP.value]:
        print(f"  {op:<40} {part:<14} {ms:8.1f} ms  {100 * ms / total:5.1f}%")


if __name__ == "__main__":
    cli.execute(main)
