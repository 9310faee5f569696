"""Optax transforms of the Apertus recipe: AdEMAMix with warmups, Muon by logical axes, token-based WSD,
batch-size plans.

One concept per module, import from the module:
- `factory.make_optimizer(name, learning_rate, weight_decay, clip_norm, **kwargs)`: the trainer's one call;
  the optimizers `ademamix`, `adamw`, `lion`, `muon` (each its module), `decay_mask.default_weight_decay_mask`;
- `schedules`: WSD and cosine schedules, AdEMAMix's alpha and beta3 schedulers; `batch_plan.BatchSizePlan`:
  tokens per step and token-based schedules in steps;
- `config`: the `optim` section of a run config; `presets`: the optimizer presets; `spikes`: the loss-spike
  guard; `schedule_plot`: the schedule as a PNG. The optimizer state's shardings are the train state's
  (`apertus_jax.train.train_state.opt_state_shardings`).
"""
