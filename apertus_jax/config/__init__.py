"""The config layer: a run's ConfigDict schema, parsed once into typed sections (docs/configs.md).

- `schema`: `base_config()`, `parse` into a `Config`, the recorded config, overrides and the schedule that
  follows `train.steps`;
- `fields`: every `--config.*` field with its value, type, range and meaning (`--config_fields`).
"""
