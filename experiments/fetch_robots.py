"""Builds a robots.txt snapshot for retroactive opt-out filtering (Apertus 3.1.1). Needs the internet.

  python -m experiments.fetch_robots --domains=domains.txt --out=/data/robots/2025-01.jsonl --threads=64

`domains.txt` holds one host per line (e.g. the top domains of your crawl). Each host gets one line
`{"domain", "robots_txt", "status", "fetched_at"}` in the output JSONL, which `RobotsSnapshot` reads.
`robots_txt` is the body of `https://<host>/robots.txt` (falling back to http) when the final status is 2xx,
else null: a missing (4xx) or unreachable (5xx, timeout, DNS) file counts as allowed (the paper's opt-out
reading). Bodies are capped at 500 KiB, as Google does. The file is written under a temporary name and
renamed at the end. Never run in tests.
"""

import concurrent.futures
import datetime
import json
import os
import urllib.error
import urllib.request

from absl import app, flags

from apertus_jax.prep.robots import decode_robots_txt
from experiments import cli

_DOMAINS = flags.DEFINE_string("domains", None, "File with one host per line.")
_OUT = flags.DEFINE_string("out", None, "Output JSONL snapshot.")
_THREADS = flags.DEFINE_integer("threads", 32, "Concurrent fetches.")
_TIMEOUT = flags.DEFINE_float("timeout", 10.0, "Seconds per request.")
_USER_AGENT = flags.DEFINE_string("user_agent", "apertus-jax-robots-snapshot/0.1", "User-Agent header.")
MAX_BYTES = 500 * 1024


def fetch(host: str, timeout: float, user_agent: str) -> dict:
    """One snapshot entry for `host` (see the module docstring)."""
    status = None
    for scheme in ("https", "http"):
        request = urllib.request.Request(f"{scheme}://{host}/robots.txt", headers={"User-Agent": user_agent})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                body = response.read(MAX_BYTES)
                return {
                    "domain": host,
                    "robots_txt": decode_robots_txt(body),
                    "status": response.status,
                }
        except urllib.error.HTTPError as e:
            return {"domain": host, "robots_txt": None, "status": e.code}
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            status = f"unreachable: {type(e).__name__}"
    return {"domain": host, "robots_txt": None, "status": status}


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments {argv[1:]}")
    if not os.path.isfile(_DOMAINS.value):
        cli.usage_error(f"--domains file {_DOMAINS.value!r} not found; pass a file with one host per line")
    with open(_DOMAINS.value) as f:
        hosts = sorted({line.strip().lower() for line in f if line.strip() and not line.startswith("#")})
    fetched_at = datetime.datetime.now(datetime.UTC).isoformat()
    tmp = f"{_OUT.value}.tmp-{os.getpid()}"
    os.makedirs(os.path.dirname(os.path.abspath(_OUT.value)), exist_ok=True)
    with (
        concurrent.futures.ThreadPoolExecutor(_THREADS.value) as pool,
        open(tmp, "w", encoding="utf-8") as out,
    ):
        for entry in pool.map(lambda h: fetch(h, _TIMEOUT.value, _USER_AGENT.value), hosts):
            out.write(json.dumps({**entry, "fetched_at": fetched_at}, ensure_ascii=False) + "\n")
    os.replace(tmp, _OUT.value)
    print(f"{len(hosts)} hosts -> {_OUT.value}")


if __name__ == "__main__":
    flags.mark_flags_as_required(["domains", "out"])
    cli.run_absl(main)
