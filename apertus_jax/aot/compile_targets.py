"""Compile targets: TPU slices and GPU clusters as compile-only devices on a CPU machine (docs/accelerators.md).

    target = parse_target("v5p-128")          # 64 v5p chips (Google Cloud counts v4/v5p TensorCores)
    devices = target_devices(target)          # compile-only devices: needs the `accelerators` extra

A TPU slice is named as Google Cloud names it: `v4-N` and `v5p-N` count TensorCores (two per chip, N/2
chips, a 3D torus), `v5e-N` and `v6e-N` count chips (a 2D torus); `num_slices` > 1 joins slices over the
data-center network (multislice). A GPU cluster is `KIND:HOSTSxGPUS` (`h100:1x8`: one host of 8 H100s), KIND
one of `GPU_KINDS`, whose XLA target configs ship in `gpu_target_configs/` (from openxla/xla, source named in each).
The devices come from `jax.experimental.topologies.get_topology_desc`: libtpu (TPU) or the CUDA PJRT plugin
with cuDNN (GPU) compile for them in this CPU process; nothing runs and nothing is allocated.
"""

from __future__ import annotations

import dataclasses
import os
import re

import jax
import numpy as np
from jax.experimental import topologies

from apertus_jax import extras

GB = 1e9


@dataclasses.dataclass(frozen=True)
class TpuChip:
    """A TPU generation: its `libtpu` topology prefix, the TensorCores per chip that a slice name counts
    (`v5p-128`: 128 TensorCores, 64 chips), the compile-only devices per chip (1: a v4/v5p chip's two
    TensorCores as one "megacore" device; 2: TPU7x's two TensorCores as two devices), HBM in GB and peak dense
    bf16 FLOP/s per chip (Google Cloud's TPU system-architecture pages, docs/accelerators.md "TPU chips")."""

    prefix: str
    cores_per_chip: int
    devices_per_chip: int
    hbm_gb: float
    peak_flops: float

    @property
    def megacore(self) -> bool:
        return self.cores_per_chip == 2 and self.devices_per_chip == 1


TPU_CHIPS = {
    "v4": TpuChip("v4", 2, 1, 32, 275e12),
    "v5p": TpuChip("v5p", 2, 1, 95, 459e12),
    "v5e": TpuChip("v5e", 1, 1, 16, 197e12),
    "v6e": TpuChip("v6e", 1, 1, 32, 918e12),
    # Ironwood: 192 GiB and 2,307 TFLOP/s bf16 per chip; both stacks' libtpu (0.0.42.1, 0.0.51) know its topologies.
    "tpu7x": TpuChip("tpu7x", 2, 2, 192 * 2**30 / 1e9, 2307e12),
}
# The GPU kinds with a target config in gpu_target_configs/ (KIND.txtpb).
GPU_KINDS = ("h100", "h200", "b200", "gb200")
GPU_TARGET_CONFIGS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_target_configs")
# The packages of the `accelerators` extra that compile for each platform (`apertus_jax.extras`): on GPU the CUDA
# PJRT plugin of the installed stack's extra, CUDA 13 (jax >= 0.11: Hopper and Blackwell) or CUDA 12 (jax 0.10.2).
CUDA_PLUGINS = {
    version: (f"jax_cuda{version}_plugin", f"jax_plugins.xla_cuda{version}", "nvidia.cudnn")
    for version in (13, 12)
}
COMPILER_MODULES = {"tpu": ("libtpu",), "gpu": CUDA_PLUGINS[12 if jax.__version_info__ < (0, 11) else 13]}


@dataclasses.dataclass(frozen=True)
class Target:
    """A compile target: `platform` "tpu" or "gpu", `kind` (a `TPU_CHIPS` or `GPU_KINDS` key), `devices`
    (chips on TPU, GPUs on GPU), the topology of one slice (`topology`, e.g. "4x4x4"; GPU "HOSTSxGPUS") and
    `num_slices`."""

    name: str
    platform: str
    kind: str
    devices: int
    topology: str
    num_slices: int = 1

    @property
    def hbm_gb(self) -> float:
        """Memory per device in GB (1e9 bytes): TPU from `TPU_CHIPS`, GPU the target config's
        `device_memory_size`."""
        if self.platform == "tpu":
            chip = TPU_CHIPS[self.kind]
            return chip.hbm_gb / chip.devices_per_chip
        size = re.search(r"device_memory_size:\s*(\d+)", gpu_target_config(self.kind))
        return int(size.group(1)) / GB

    @property
    def sides(self) -> list[int]:
        """The slice's chips (GPUs: hosts, GPUs) along each side of `topology`."""
        return [int(s) for s in self.topology.split("x")]

    @property
    def chips_per_host(self) -> tuple[int, int, int]:
        """TPU chips per host as (x, y, z) bounds: 2x2x1 (Google Cloud's 4-chip TPU VMs), fewer on smaller
        slices."""
        sides = self.sides
        return (min(sides[0], 2), min(sides[1], 2) if len(sides) > 1 else 1, 1)

    @property
    def wrap(self) -> tuple[bool, bool, bool]:
        """Which sides of a TPU slice close into a ring (wraparound links): on v4 and v5p every side of a slice
        of whole 4x4x4 cubes (a 3D torus; smaller slices are a mesh), on v5e and v6e a side of 16 chips, the
        full pod's (docs/accelerators.md "TPU chips")."""
        sides = self.sides
        if len(sides) == 3:
            return (all(s % 4 == 0 for s in sides),) * 3
        return (*(s == 16 for s in sides), False)

    @property
    def peak_flops(self) -> float | None:
        """Peak dense bf16 FLOP/s of one device (TPU; None on GPU, where no time is estimated)."""
        if self.platform != "tpu":
            return None
        chip = TPU_CHIPS[self.kind]
        return chip.peak_flops / chip.devices_per_chip


def _torus(chips: int, dims: int) -> list[int]:
    """The slice shape Google Cloud gives `chips` chips (a power of two): double the smallest side from all
    ones, sides ascending with 1s last (4 chips in 3D: 2x2x1; 128: 4x4x8; 64 in 2D: 8x8)."""
    sides = [1] * dims
    while int(np.prod(sides)) < chips:
        sides[sides.index(min(sides))] *= 2
    return sorted(sides, key=lambda s: (s == 1, s))


def target_forms() -> str:
    """The target names `parse_target` accepts, from `TPU_CHIPS` and `GPU_KINDS`, for help texts and errors:
    "TPU v4-N, v5p-N, ..., tpu7x-N (e.g. v5p-128) or GPU KIND:HOSTSxGPUS, KIND one of h100, ... (e.g. h100:1x8)"."""
    tpus = ", ".join(f"{kind}-N" for kind in TPU_CHIPS)
    return f"TPU {tpus} (e.g. v5p-128) or GPU KIND:HOSTSxGPUS, KIND one of {', '.join(GPU_KINDS)} (e.g. h100:1x8)"


def parse_target(name: str, num_slices: int = 1) -> Target:
    """The `Target` of a name (`target_forms`): `v4-N`, `v5p-N`, `tpu7x-N` (N >= 8 TensorCores), `v5e-N`,
    `v6e-N` (N <= 256 chips), N a power of two, or `KIND:HOSTSxGPUS` with KIND in `GPU_KINDS`.

    Raises:
      ValueError: an unknown or malformed name, a bad `num_slices` (one line naming the accepted forms).
    """
    if num_slices < 1:
        raise ValueError(f"--num_slices={num_slices}: use 1 or more TPU slices")
    tpu = re.fullmatch(rf"({'|'.join(TPU_CHIPS)})-(\d+)", name)
    if tpu:
        kind, count = tpu.group(1), int(tpu.group(2))
        cores_per_chip = TPU_CHIPS[kind].cores_per_chip
        chips = count // cores_per_chip
        flat = kind in ("v5e", "v6e")
        if (
            count % cores_per_chip
            or chips < (1 if flat else 4)
            or chips & (chips - 1)
            or (flat and chips > 256)
        ):
            sizes = "1 to 256 chips" if flat else "8 or more TensorCores"
            raise ValueError(
                f"--target={name}: {kind} slices here are powers of two ({sizes}), e.g. {kind}-{8 if not flat else 4}"
            )
        topology = "x".join(map(str, _torus(chips, 2 if flat else 3)))
        devices = chips * TPU_CHIPS[kind].devices_per_chip * num_slices
        return Target(name, "tpu", kind, devices, topology, num_slices)
    gpu = re.fullmatch(r"([a-z0-9]+):(\d+)x(\d+)", name)
    if gpu and gpu.group(1) in GPU_KINDS and int(gpu.group(2)) > 0 and int(gpu.group(3)) > 0:
        if num_slices != 1:
            raise ValueError(f"--num_slices is for TPU slices; a GPU cluster is KIND:HOSTSxGPUS ({name})")
        hosts, gpus = int(gpu.group(2)), int(gpu.group(3))
        return Target(name, "gpu", gpu.group(1), hosts * gpus, f"{hosts}x{gpus}")
    raise ValueError(f"--target={name}: unknown target; use {target_forms()}")


def gpu_target_config(kind: str) -> str:
    """The text of `gpu_target_configs/KIND.txtpb` (a GpuTargetConfigProto in text form)."""
    with open(os.path.join(GPU_TARGET_CONFIGS_DIR, f"{kind}.txtpb"), encoding="utf-8") as f:
        return f.read()


def missing_extra(platform: str) -> str | None:
    """The package of the `accelerators` extra that `platform` ("tpu" | "gpu") needs and this Python lacks,
    or None when all are installed."""
    return extras.missing("accelerators", COMPILER_MODULES[platform])


def target_devices(target: Target) -> list:
    """The compile-only devices of `target`, in slice, host, device order.

    Raises:
      ValueError: the compiler of the target's platform is not installed (the one line names the extra).
    """
    extras.require("accelerators", f"--target={target.name}", COMPILER_MODULES[target.platform])
    if target.platform == "gpu":
        return topologies.get_topology_desc(
            target.kind, "cuda", target_config=gpu_target_config(target.kind), topology=f"1x{target.topology}"
        ).devices
    # libtpu locks /tmp/libtpu_lockfile for the one process that may own the chips; compile-only devices own
    # none, so concurrent plans (and test workers) may load it side by side.
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "true")
    chip = TPU_CHIPS[target.kind]
    return topologies.get_topology_desc(
        topology_name=f"{chip.prefix}:{target.topology}",
        platform="tpu",
        chip_config_name="megacore" if chip.megacore else "default",
        chips_per_host_bounds=target.chips_per_host,
        wrap=target.wrap,
        num_slices=target.num_slices,
    ).devices
