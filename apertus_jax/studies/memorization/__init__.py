"""The Apertus memorization study (README.md): what a model recalls of text it saw a planned number of times.

Probes and canaries injected at planned repetition counts, standard vs Goldfish runs, scored per count.

- `study`: the runs, the resume check and the scores (`run_study`).
"""
