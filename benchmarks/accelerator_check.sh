#!/usr/bin/env bash
# The accelerator check, one H100/H200 GPU, under 8 minutes (each stage has its own time limit):
#   1. packed-segment attention parity, cuDNN against the XLA reference (values, gradients, isolation);
#   2. train-step throughput of the 1b and 8b-slice configs in bf16 (tokens/s/device, MFU);
#   3. the same two configs with FP8 projections.
# Usage: benchmarks/accelerator_check.sh [--dry_run]
#   --dry_run: the parity check with jax_nn at seq 256 and the 1b stages with tiny widths, on any backend
#   (CPU CI). The 8b-slice stages are skipped there: at tiny widths they are the same program as 1b.
# Prints one line per stage; exits non-zero if any stage fails (the others still run).
set -u
cd "$(dirname "$0")/.."
DRY=""
if [ "${1:-}" = "--dry_run" ]; then DRY="--dry_run"; fi
PY="${PYTHON:-python}"
status=0

stage() {  # stage SECONDS NAME COMMAND...
  local limit=$1 name=$2
  shift 2
  local start=$SECONDS
  echo "== $name"
  if timeout "$limit" "$@"; then
    echo "== $name: ok ($((SECONDS - start)) s)"
  else
    echo "== $name: FAILED (exit $?, $((SECONDS - start)) s)"
    status=1
  fi
}

echo "accelerator check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $($PY -c 'import jax; print(jax.devices()[0].device_kind)')"
stage 90 "attention parity (cudnn vs xla)" "$PY" -m benchmarks.attention_parity $DRY
CONFIGS="1b 8b-slice"
if [ -n "$DRY" ]; then CONFIGS="1b"; fi
for config in $CONFIGS; do
  stage 100 "$config bf16" "$PY" -m benchmarks.accelerator --config=$config --steps 8 --warmup 2 $DRY
  stage 100 "$config fp8" "$PY" -m benchmarks.accelerator --config=$config --steps 8 --warmup 2 --fp8 $DRY
done
exit $status
