"""Builds a robots.txt snapshot for retroactive opt-out filtering (Apertus 3.1.1). Needs the internet.

  python -m experiments.fetch_robots --domains=domains.txt --out=/data/robots/2025-01.jsonl --threads=64

`domains.txt` holds one host per line (e.g. the top domains of your crawl). Each host gets one line
`{"domain", "robots_txt", "status", "fetched_at"}` in the output JSONL, which `RobotsSnapshot` reads
(`apertus_jax.prep.robots.fetch`: https falling back to http, a body only for a 2xx answer, 500 KiB at most).
The file appears atomically at the end. A missing --domains file, an --out that cannot be written or a --threads
below 1 ends with one line on stderr and exit status 2, before any fetch.
"""

from absl import flags

from experiments import cli

cli.require_extras("prep")  # before the modules that import it: one line and exit 2 without it

from apertus_jax.prep.robots.fetch import USER_AGENT, read_hosts, write_snapshot  # noqa: E402

_DOMAINS = flags.DEFINE_string("domains", None, "File with one host per line.")
_OUT = flags.DEFINE_string("out", None, "Output JSONL snapshot.")
_THREADS = flags.DEFINE_integer("threads", 32, "Concurrent fetches.", lower_bound=1)
_TIMEOUT = flags.DEFINE_float("timeout", 10.0, "Seconds per request.")
_USER_AGENT = flags.DEFINE_string("user_agent", USER_AGENT, "User-Agent header.")


def main(argv) -> None:
    if len(argv) > 1:
        raise ValueError(f"unexpected arguments {argv[1:]}")
    cli.required(domains=_DOMAINS.value, out=_OUT.value)
    cli.check_output_file(_OUT.value, "--out")  # before the fetches: the snapshot is written at the end
    hosts = read_hosts(_DOMAINS.value)
    write_snapshot(hosts, _OUT.value, _THREADS.value, _TIMEOUT.value, _USER_AGENT.value)
    print(f"{len(hosts)} hosts -> {_OUT.value}")


if __name__ == "__main__":
    cli.execute(main)
