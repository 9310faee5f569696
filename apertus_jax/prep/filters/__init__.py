"""The filters of data preparation (Apertus 3.1, Boldt 3.1, Apertus 4.1.2; docs/recipe.md 7-9).

- `pii`: email, IP and IBAN anonymization;
- `toxicity`: per-language removal of the most toxic 5%;
- `quality`: Boldt's quality tiers and Dense-Core;
- `classifier`: embedding + JAX MLP heads that score documents;
- `embedders`: the document embedders of the classifier heads;
- `decontam`: post-training data screened against benchmark prompts;
- `dedup`: exact and MinHash deduplication on datatrove's dedup steps.
"""
