"""How datatrove's local executor starts processes and what it prints, for a process that already runs JAX.

Two defaults of datatrove 0.10 fit a JAX process badly:

- its `multiprocess.Manager()` (and any pool) uses the platform's default start method, `fork` on Linux;
  once JAX has started its backend (here: training the classifier heads) every `os.fork()` prints JAX's
  "os.fork() ... will likely lead to a deadlock" warning, and forking a multithreaded process really can
  deadlock. `use_forkserver` makes `forkserver` the default, whose server is started with fork + exec.
- each task re-adds a console sink at INFO level that prints the pipeline banner, every input file and a
  statistics dump per task (hundreds of lines; the CLI prints its own summary table). `quiet_console`
  keeps the per-task log files (`<logging_dir>/logs/task_*.log`, DEBUG) complete and shows only warnings
  and errors on the console.
"""

import sys

_FORMAT = (
    "{time:YYYY-MM-DD HH:mm:ss.SSS} | <level>{level: <8}</level> | {name}:{function}:{line} - "
    "<level>{message}</level>"
)


# What the forkserver imports once, so that every worker it forks has it already: `quiet_worker` (a quiet
# console), the job's main module, the modules whose steps a worker unpickles, and spaCy, which datatrove's
# word tokenizer of the MinHash signatures imports in every worker that computes them. A worker imported
# these itself before; spaCy alone took over a second of CPU.
WORKER_PRELOAD = (
    "apertus_jax.prep.quiet_worker",
    "__main__",
    "apertus_jax.prep.steps",
    "apertus_jax.prep.filters.dedup",
    "apertus_jax.prep.tokenize",
    "spacy",
)


def use_forkserver() -> None:
    """Sets `forkserver` as the default start method of `multiprocess` (datatrove's multiprocessing); the
    server preloads `WORKER_PRELOAD`, so the workers it forks have a quiet console too."""
    import multiprocess

    multiprocess.set_start_method("forkserver", force=True)
    multiprocess.set_forkserver_preload(list(WORKER_PRELOAD))


def quiet_console(level: str = "WARNING") -> None:
    """Datatrove's console output from this process shows only messages at `level` or above; task log files
    still get everything. Applies to tasks run in this process (and, through `quiet_worker`, in workers)."""
    import datatrove.executor.base as executor_base
    import datatrove.utils.logging as datatrove_logging
    from loguru import logger

    def console_only_warnings():
        logger.remove()
        logger.add(sys.stderr, level=level, format=_FORMAT)

    def add_task_logger(logging_dir, rank, local_rank=0, node_rank=-1):
        del local_rank, node_rank
        console_only_warnings()
        logfile = logging_dir.open(f"logs/task_{rank:05d}.log", "w")
        logger.add(logfile, colorize=False, level="DEBUG", format=_FORMAT)
        logger.info(f"Launching pipeline for {rank=}")
        return logfile

    console_only_warnings()
    datatrove_logging.setup_default_logger = console_only_warnings
    executor_base.add_task_logger = add_task_logger
