"""XLA:CPU set to compile fast, for programs that are only analyzed (memory plans) or whose run time is negligible
(the tests' tiny programs), on the XLA of the installed jaxlib.

    compiled = lowered.compile(FAST_COMPILE)                       # options of one compilation
    os.environ["XLA_FLAGS"] = fast_compile_flags()                 # every compilation of a process, before jax starts

LLVM's optimizations are skipped (`xla_backend_optimization_level=0`: the tiny resume run's train step compiled in
3.4 s instead of 7.0 s on 2 cores) and a program's machine code is generated in one piece, not split for threads
(`xla_cpu_parallel_codegen_split_count=1`). Before jax 0.11, XLA:CPU also had its older fusion emitters, a third
faster to compile than the MLIR ones (`xla_cpu_use_fusion_emitters=false`; XLA of jax 0.11 and later removed the
flag and refuses it). Buffer assignment and collectives come from the HLO passes, which these options leave alone:
a memory plan's temporaries moved by at most 0.3% against XLA's defaults, its collectives not at all.

Importing this module imports no jax (the tests set `XLA_FLAGS` before jax starts); the version is read from the
installed jaxlib's metadata.
"""

import importlib.metadata


def _jaxlib_version() -> tuple[int, ...]:
    return tuple(int(part) for part in importlib.metadata.version("jaxlib").split(".")[:2])


# {debug option: value}: the options of `jax.stages.Lowered.compile`, and as `--name=value` the XLA_FLAGS.
FAST_COMPILE: dict[str, int | bool] = {
    "xla_backend_optimization_level": 0,
    "xla_cpu_parallel_codegen_split_count": 1,
    **({"xla_cpu_use_fusion_emitters": False} if _jaxlib_version() < (0, 11) else {}),
}


def fast_compile_flags() -> str:
    """`FAST_COMPILE` as XLA_FLAGS (`--xla_backend_optimization_level=0 ...`)."""
    return " ".join(f"--{name}={str(value).lower()}" for name, value in FAST_COMPILE.items())
