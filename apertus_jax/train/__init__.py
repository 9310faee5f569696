"""The trainer: a typed run config and its plug-ins in, checkpointed training steps out (docs/architecture.md).

- `run`: the front door, `Run(config, objective=, batch_source=, hooks=, init_params=)`: mesh, optimizer, state
  spec and THE jitted train step;
- `loop`: `train(run, workdir)`: restore or initialize, step, log, checkpoint, faults and preemption;
- `step`: the train step over microbatches, and the `Objective` plug-in;
- `loss`: the pretraining cross-entropy, fused with the lm_head, with the z-loss;
- `batches`: the `BatchSource` plug-in and the prefetcher;
- `hooks`: the `Hook` plug-in and its loop context;
- `config`: `RunConfig`, the trainer's typed sections, and the rules between them;
- `train_state`: abstract shapes, shardings and sharded initialization of params and optimizer state;
- `checkpoint`: Orbax checkpoints, restored onto any mesh, and the workdir lock;
- `metrics`: metrics.jsonl, TensorBoard, W&B, the log line and profiler traces;
- `distributed`: multi-process start-up from the launcher's environment.

Nothing here imports post-training, data preparation, evaluation or a job.
"""
