"""Peer training-step throughput on bench-18m: MaxText and HF transformers, measured like ours.

    python -m benchmarks.peers maxtext|transformers|all [--cache DIR --steps 15]

Prints one line per peer, `PEER tokens_per_s=N (median of K steps)`. `run.py` installs each peer into its own
virtual environment under the cache directory (first MaxText install: minutes) and runs it on the shapes of
`run.BENCH_18M`; `transformers_step.py` is the script the transformers peer runs inside its environment.
"""
