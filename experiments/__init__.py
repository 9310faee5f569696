"""The command-line jobs, `python -m experiments.NAME`; experiments/cli.py is their one entry point.

Importing this package, the first thing a job does, sets the cyclic garbage collector's thresholds of the
process (`GC_THRESHOLDS`) before the job imports jax.
"""

import gc

# Python's collector runs through its youngest objects every 700 allocations net of frees, and every tenth
# time through the older ones as well: jax, flax and orbax build millions of long-lived objects at import and
# while tracing, and each of those collections walks them again. Collecting the youngest every 10,000 instead
# made the collector's share of a tiny training run (configs/runs/tiny_resume.py on 8 CPU devices) 0.3 s
# instead of 1.1 s of its 11 s of CPU, with the same peak memory; the older generations keep their defaults.
GC_THRESHOLDS = (10_000, 10, 10)
gc.set_threshold(*GC_THRESHOLDS)
