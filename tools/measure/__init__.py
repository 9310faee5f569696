"""The measured figures the docs quote: each registered measurement runs its documented command(s) and reads
the files they write; the results files in docs/results/ hold the values, and every generated block of the pages
(README.md, BENCHMARKS.md, docs/) is rewritten from them (docs/results.md).

- `measurements`: the registry (`MEASUREMENTS`), the renderers of the generated blocks (`RENDERERS`, `render`)
  and `measure_all`.
- `commands`: running a measurement's documented commands and reading the files and JSON they write.
- one module per study, its measurements and renderers: `demo` (the demo run, post-training, evaluation,
  lm-eval), `counts`, `memory_plans`, `goldfish`, `memorization`, `distillation`, `ablation_studies`,
  `fairness`, `portability`, `accelerators` (with `gpu_check`, the accelerator check's outputs gathered).
- programs a measurement runs, each printing one JSON object: `demo_corpus`, `param_counts`,
  `canonical_cost`.
- `results`: results files, generated blocks (table templates with `{NAME.KEY}` placeholders, their captions)
  and the checks that keep figures out of the prose.
- `processor_kinds`: records per processor kind, spreads and the fresh-run check.
- `__main__`: the command, `python -m tools.measure`.

Not installed (setup.py packages the library, its commands and configs): it runs from a checkout.
"""
