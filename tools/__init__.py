"""The repository's own tooling, outside the installed library: `tools.measure` re-measures the figures the docs
quote and rewrites them (docs/results.md)."""
