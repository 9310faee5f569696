"""Ablations (README.md): a base config with named override sets and seeds, and the comparison of their runs.

- `ablate`: the runs of an ablation file (`run_ablation`), checked against what finished runs recorded;
- `compare`: loss and in-loop metrics vs tokens of any runs, as a PNG and a Markdown table.
"""
