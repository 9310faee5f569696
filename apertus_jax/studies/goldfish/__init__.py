"""The Goldfish study (README.md): does Goldfish loss stop memorization, and do two editions drop alike?

Standard loss against Goldfish on sonnets repeated for many epochs, scored on their greedy continuations; and
whether the token, mixed and canonical hashes drop the same words in two editions of one text.

- `study`: standard loss vs Goldfish on repeated sonnets, trained and scored at CPU scale;
- `formats`: the token, mixed and canonical hashes on Gutenberg vs First Folio Shakespeare.
"""
