"""The Apertus memorization study (README.md): probes and canaries injected at planned repetition counts,
standard vs Goldfish runs, scored per count.

- `study`: the runs, the resume check and the scores (`run_study`).
"""
