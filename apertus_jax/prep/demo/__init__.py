"""The demo data of preparation: inputs built from vendored real text, and the demo corpus rebuilt.

- `inputs`: demo inputs for the preparation pipeline (no network);
- `boldt`: Boldt's scored subsets of the demo corpus, with rule-based scores;
- `corpus_build`: the vendored demo corpus rebuilt from the npm and Debian registries
  (`experiments.build_demo_corpus`).
"""
