"""Launch-method detection of apertus_jax.train.distributed (the explicit path runs in test_multihost.py)."""

import pytest

from apertus_jax.train import distributed

SLURM_STEP = dict(
    SLURM_JOB_ID="4242", SLURM_STEP_NODELIST="nid[001-004]", SLURM_PROCID="3", SLURM_LOCALID="3"
)


@pytest.mark.parametrize(
    "environ, method",
    [
        ({}, "single"),
        (
            dict(JAX_COORDINATOR_ADDRESS="127.0.0.1:1234", JAX_NUM_PROCESSES="2", JAX_PROCESS_ID="1"),
            "explicit",
        ),
        (dict(SLURM_STEP, SLURM_NTASKS="16"), "slurm"),
        (dict(SLURM_STEP, SLURM_NTASKS="1"), "single"),  # one task: nothing to coordinate
        (dict(SLURM_JOB_ID="4242", SLURM_NTASKS="16"), "single"),  # the batch script itself, outside srun
        (dict(TPU_WORKER_HOSTNAMES="t1k-0,t1k-1,t1k-2,t1k-3", TPU_WORKER_ID="2"), "tpu"),  # GKE
        (dict(TPU_WORKER_HOSTNAMES="t1k-0", TPU_WORKER_ID="0"), "single"),  # single-host slice
        (dict(APERTUS_DISTRIBUTED="1"), "tpu"),  # launch/tpu_pod.sh on GCE TPU VMs
        (
            dict(
                SLURM_STEP,
                SLURM_NTASKS="16",
                JAX_COORDINATOR_ADDRESS="10.0.0.1:5555",
                JAX_NUM_PROCESSES="16",
                JAX_PROCESS_ID="3",
            ),
            "explicit",
        ),  # explicit variables win
    ],
)
def test_detect(environ, method):
    assert distributed.detect(environ) == method


@pytest.mark.parametrize(
    "environ, message",
    [
        (dict(JAX_COORDINATOR_ADDRESS="127.0.0.1:1234"), "also set JAX_NUM_PROCESSES and JAX_PROCESS_ID"),
        (
            dict(JAX_COORDINATOR_ADDRESS="127.0.0.1:1234", JAX_NUM_PROCESSES="2", JAX_PROCESS_ID="two"),
            "also set JAX_NUM_PROCESSES and JAX_PROCESS_ID",
        ),
        (
            dict(JAX_COORDINATOR_ADDRESS="127.0.0.1:1234", JAX_NUM_PROCESSES="2", JAX_PROCESS_ID="2"),
            r"JAX_PROCESS_ID=2 must be in \[0, JAX_NUM_PROCESSES=2\)",
        ),
    ],
)
def test_bad_explicit_environment_is_one_clear_error(environ, message):
    with pytest.raises(ValueError, match=message):
        distributed.detect(environ)


def test_single_process_is_a_no_op():
    assert distributed.initialize_from_env({}) == "single"
