"""Tiny run on the UDHR part of the demo corpus with a batch-size doubling (4 -> 8 rows of 64 tokens from
step 7) and a curriculum stage change (new data seed at 2,560 tokens, i.e. from step 9): the exact-resume
tests kill it around both boundaries."""

from configs.recipes.tiny_udhr import tiny_udhr_config


def get_config():
    config = tiny_udhr_config(seq_len=64)
    config.data.num_shards = 2  # the same batches on 1 or 2 processes (multi-process test)
    config.data.pipeline.stages = [
        dict(name="stage1", until_tokens=6 * 256 + 2 * 512, weights=dict(demo=1.0), seed=0),
        dict(name="stage2", until_tokens=None, weights=dict(demo=1.0), seed=1),
    ]
    config.train.steps = 12
    config.train.batch_plan = ((0, 4 * 64), (6 * 4 * 64, 8 * 64))
    config.optim.peak_lr = 1e-2
    config.optim.warmup_tokens = 2 * 256
    config.optim.decay_tokens = 3 * 512
    config.optim.total_tokens = 6 * 256 + 6 * 512
    config.optim.clip_norm = 1.0
    config.mesh.data, config.mesh.fsdp, config.mesh.tensor = 1, 2, -1
    config.checkpoint.every_steps = 2
    config.checkpoint.keep = 50
    config.lock()
    return config
