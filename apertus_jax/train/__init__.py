"""The trainer: a typed run config and its plug-ins in, checkpointed training steps out.

The front door is `run.Run(config, objective=, batch_source=, hooks=)` with `config` a
`config.RunConfig`, and `loop.train(run, workdir)`. Plug-in points: the objective (`step.Objective`), the
batch source (`batches.BatchSource`) and hooks (`hooks.Hook`). Below them: the train step with gradient
accumulation (`step`, `loss`), the sharded train state and batch (`train_state`), Orbax checkpoints
(`checkpoint`), metrics, W&B and profiler traces (`metrics`), prefetching (`batches`) and multi-host
start-up (`distributed`); the loop itself counts non-finite steps and handles preemption. Nothing here
imports post-training, data preparation or a job (docs/architecture.md).
"""
