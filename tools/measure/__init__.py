"""The measured figures the docs quote: each registered measurement runs its documented command(s) and reads
the files they write; the results files in docs/results/ hold the values, and every bound figure of README.md
and docs/ is rewritten from them (docs/results.md).

- `measurements`: the registry (`MEASUREMENTS`), the renderers of the generated blocks and `measure_all`.
- `results`: results files, bound figures (`<!-- result NAME.KEY -->`) and generated blocks.
- `processor_kinds`: records per processor kind, spreads and the fresh-run check.
- `__main__`: the command, `python -m tools.measure`.

Not installed (setup.py packages the library, its commands and configs): it runs from a checkout.
"""
