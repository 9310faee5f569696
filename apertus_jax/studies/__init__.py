"""The research studies, one folder each: its job, its README; they import the core, never each other.

- `goldfish`: standard loss vs Goldfish on repeated sonnets, and whether the hashes drop alike in two editions;
- `memorization`: probes and canaries injected at planned counts, standard vs Goldfish runs, scored per count;
- `distillation`: a student distilled from a teacher against the same student trained from scratch;
- `ablations`: a base config with named override sets and seeds, and the comparison of their runs.

Reusable mechanisms stay in the core (data kinds in `apertus_jax.data`, metrics in `apertus_jax.eval`, the
distillation objective in `apertus_jax.posttrain`); a study's command is in `experiments/`, its configs in
`configs/`, its measured figures in `tools/measure/`. Each study's README.md names every file that a change of
the study touches. A new study is a folder of its own here, with its README (docs/architecture.md, "Add a
study").
"""
