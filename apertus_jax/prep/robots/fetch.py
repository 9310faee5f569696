"""robots.txt snapshots for retroactive opt-out filtering (Apertus 3.1.1): today's file of every host.

`write_snapshot(read_hosts(path), out)` fetches `https://<host>/robots.txt` (falling back to http) for each
host and writes one JSON line `{"domain", "robots_txt", "status", "fetched_at"}` per host to `out`, the format
`apertus_jax.prep.robots.compliance.RobotsSnapshot` reads. `robots_txt` is the body when the final status is 2xx, else
null: a missing (4xx) or unreachable (5xx, timeout, DNS) file counts as allowed (the paper's opt-out reading).
Bodies are capped at 500 KiB, as Google does. Needs the internet; CLI: `python -m experiments.fetch_robots`.
"""

import concurrent.futures
import datetime
import json
import os
import urllib.error
import urllib.request
from collections.abc import Sequence

from apertus_jax import files
from apertus_jax.prep.robots.compliance import decode_robots_txt

MAX_BYTES = 500 * 1024
USER_AGENT = "apertus-jax-robots-snapshot/0.1"


def fetch_robots_txt(host: str, timeout: float, user_agent: str = USER_AGENT) -> dict:
    """One snapshot entry `{"domain", "robots_txt", "status"}` of `host` (module docstring).

    Args:
      host: a host name, optionally with `:port`.
      timeout: seconds per request.
      user_agent: the User-Agent header.

    Returns:
      `status` is the HTTP status of the last answer, or "unreachable: <error type>" when neither https nor
      http answered; `robots_txt` is the decoded body (`robots.decode_robots_txt`) of a 2xx answer, else None.
    """
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


def read_hosts(path: str) -> list[str]:
    """The hosts of a file with one host per line: lower-cased, sorted, without duplicates, blank lines and
    `#` comment lines.

    Raises:
      FileNotFoundError: `path` is not a file.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--domains file {path!r} not found; pass a file with one host per line")
    with open(path) as f:
        return sorted({line.strip().lower() for line in f if line.strip() and not line.startswith("#")})


def write_snapshot(
    hosts: Sequence[str], out: str, threads: int = 32, timeout: float = 10.0, user_agent: str = USER_AGENT
) -> None:
    """Fetches every host (`threads` at once, `timeout` seconds per request) and writes the snapshot JSONL
    `out` in the order of `hosts`, every line with the same `fetched_at` (UTC, ISO 8601, taken at the start).
    `out` appears atomically when every host is done (parent folders are created).
    """
    fetched_at = datetime.datetime.now(datetime.UTC).isoformat()
    with (
        concurrent.futures.ThreadPoolExecutor(threads) as pool,
        files.atomic_path(out) as tmp,
        open(tmp, "w", encoding="utf-8") as f,
    ):
        for entry in pool.map(lambda host: fetch_robots_txt(host, timeout, user_agent), hosts):
            f.write(json.dumps({**entry, "fetched_at": fetched_at}, ensure_ascii=False) + "\n")
