"""The train step compiled ahead of time, without running it: memory plans and hardware targets.

- `memory_plan`: per-device bytes of the loop's step, compiled on a mesh of virtual CPU devices;
- `fast_compile`: XLA:CPU options that compile fast for analysis (and for the tests' tiny programs);
- `compile_targets`: TPU slices and GPU clusters as compile-only devices (`--target`);
- `target_plan`: the memory plan and step estimate from the TPU or GPU compiler for a compile target;
- `document_mask`: what the packed-document mask costs in cuDNN's attention;
- `gpu_target_configs`: the XLA GPU target configs of the GPU kinds (data, not code).
"""
