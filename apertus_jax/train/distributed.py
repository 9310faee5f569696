"""Multi-process start-up: `jax.distributed.initialize` from the launcher's environment.

Call `initialize_from_env()` once, before any JAX computation. Which launcher started the process is read
from its environment, first match wins:

| method | environment | coordinator, process count, process id |
| --- | --- | --- |
| explicit | JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID | as given |
| slurm | inside `srun` (SLURM_JOB_ID, SLURM_STEP_NODELIST, SLURM_NTASKS > 1, SLURM_PROCID, SLURM_LOCALID) | JAX's SLURM detection: first host of the step's node list, port from the job id; SLURM_NTASKS; SLURM_PROCID; one GPU per task (SLURM_LOCALID) |
| tpu | GKE (TPU_WORKER_HOSTNAMES or TPU_PROCESS_ADDRESSES with > 1 host) or APERTUS_DISTRIBUTED=1 (launch/tpu_pod.sh sets it on GCE TPU VMs, whose worker list lives in the metadata server) | JAX's TPU detection |
| single | anything else | no-op (one process) |

With several processes the CPU backend's collectives use gloo (`jax_cpu_collectives_implementation`),
which is what multi-process runs on CPU (the localhost test) need; accelerator collectives are unaffected.
"""

import os
from collections.abc import Mapping

import jax

_EXPLICIT = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")
_SLURM_STEP = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID")
_TPU_HOSTS = ("TPU_PROCESS_ADDRESSES", "TPU_WORKER_HOSTNAMES")


def detect(environ: Mapping[str, str]) -> str:
    """The launch method of this process: "explicit", "slurm", "tpu" or "single" (table in the module doc).

    Raises:
      ValueError: JAX_COORDINATOR_ADDRESS set without integer JAX_NUM_PROCESSES and JAX_PROCESS_ID.
    """
    if "JAX_COORDINATOR_ADDRESS" in environ:
        try:
            num_processes, process_id = int(environ["JAX_NUM_PROCESSES"]), int(environ["JAX_PROCESS_ID"])
        except (KeyError, ValueError):
            raise ValueError(
                "JAX_COORDINATOR_ADDRESS is set: also set JAX_NUM_PROCESSES and JAX_PROCESS_ID to "
                "integers (process ids 0 .. JAX_NUM_PROCESSES-1)"
            ) from None
        if not 0 <= process_id < num_processes:
            raise ValueError(f"JAX_PROCESS_ID={process_id} must be in [0, JAX_NUM_PROCESSES={num_processes})")
        return "explicit"
    if all(name in environ for name in _SLURM_STEP) and int(environ["SLURM_NTASKS"]) > 1:
        return "slurm"
    hosts = next((environ[name] for name in _TPU_HOSTS if name in environ), "")
    if len([h for h in hosts.split(",") if h]) > 1 or environ.get("APERTUS_DISTRIBUTED") == "1":
        return "tpu"
    return "single"


def initialize_from_env(environ: Mapping[str, str] | None = None) -> str:
    """Initializes the JAX distributed system as the launcher's environment says; returns the method used.

    Raises:
      ValueError: inconsistent explicit JAX_* variables (see `detect`).
    """
    environ = os.environ if environ is None else environ
    method = detect(environ)
    if method == "single":
        return method
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if method == "explicit":
        jax.distributed.initialize(
            environ["JAX_COORDINATOR_ADDRESS"],
            int(environ["JAX_NUM_PROCESSES"]),
            int(environ["JAX_PROCESS_ID"]),
        )
    else:
        jax.distributed.initialize()
    return method
