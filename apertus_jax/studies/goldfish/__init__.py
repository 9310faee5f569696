"""The Goldfish study (README.md): does Goldfish loss stop memorization of repeated text, and do its hashes
drop the same words in two editions of one text?

- `study`: standard loss vs Goldfish on repeated sonnets, trained and scored at CPU scale;
- `formats`: the token, mixed and canonical hashes on Gutenberg vs First Folio Shakespeare.
"""
