#!/usr/bin/env bash
# Launch the main job on every host of a Cloud TPU pod slice (v4 / v5e / v5p / v6e).
#
#   launch/tpu_pod.sh TPU_NAME ZONE configs/apertus_8b.py gs://BUCKET/runs/apertus_8b [extra flags...]
#
# Every worker runs the same command; jax.distributed.initialize() finds the pod's coordinator from the TPU
# metadata (experiments/pretrain.py calls it when APERTUS_DISTRIBUTED=1). The workdir
# must be shared by all hosts (a gs:// bucket or a shared filesystem). Re-running the same command resumes
# from the newest checkpoint; a preempted slice receives SIGTERM and saves one first.
set -euo pipefail
if [[ $# -lt 4 ]]; then
  echo "usage: $0 TPU_NAME ZONE CONFIG WORKDIR [extra flags...]" >&2
  exit 2
fi
TPU_NAME=$1 ZONE=$2 CONFIG=$3 WORKDIR=$4
shift 4
REPO=${REPO:-https://github.com/swiss-ai/apertus_jax.git}
REF=${REF:-main}

gcloud compute tpus tpu-vm ssh "$TPU_NAME" --zone "$ZONE" --worker=all --command "
  set -euo pipefail
  if [[ ! -d apertus_jax ]]; then git clone --depth 1 --branch $REF $REPO apertus_jax; fi
  cd apertus_jax
  python3 -m venv .venv && . .venv/bin/activate
  pip install -q -e . 'jax[tpu]==0.10.2' -f https://storage.googleapis.com/jax-releases/libtpu_releases.html
  APERTUS_DISTRIBUTED=1 python -m experiments.pretrain --config=$CONFIG --workdir=$WORKDIR $*
"
