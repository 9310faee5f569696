"""The optimizers of the Apertus recipe as Optax transforms, with their schedules and batch-size plans.

AdEMAMix with warmups, Muon by logical axes, token-based WSD (docs/optimizers.md).

- `factory`: `make_optimizer(name, ...)`, the trainer's one call;
- `ademamix`, `adamw`, `lion`, `muon`: the optimizers;
- `spikes`: the loss-spike guard around any of them;
- `decay_mask`: which parameters get weight decay;
- `schedules`: WSD and cosine in tokens, AdEMAMix's alpha and beta3 warmups;
- `batch_plan`: `BatchSizePlan`, tokens per step and token-based schedules in steps;
- `config`: the `optim` section and the optimizer it builds;
- `presets`: the Apertus-8B and -70B optimizer settings;
- `schedule_plot`: the schedules as a PNG.
"""
