"""Goldfish loss (Hans et al. 2024; docs/recipe.md 3, docs/goldfish.md): which target tokens a row drops.

- `drop_masks`: `GoldfishSpec` and the drop rule over the token, mixed and canonical hashes;
- `canonical`: the canonical hash, keyed on normalized words so format variants drop alike.
"""
