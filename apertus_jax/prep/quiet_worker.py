"""Preloaded by the forkserver of datatrove's local executor (`local_executor.use_forkserver`): importing it
quiets the console of every worker forked from that server, as `local_executor.quiet_console` does for the
main process (task log files keep everything)."""

from apertus_jax.prep.local_executor import quiet_console

quiet_console()
