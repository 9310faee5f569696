"""Retroactive robots.txt compliance (Apertus 3.1.1, docs/recipe.md 7): today's robots.txt decides for every crawl year.

A snapshot maps a host to the text of its current robots.txt. A host without an entry (no file, 4xx,
unreachable) is allowed: the opt-out reading of the paper. Two modes:
  - `domain` (the paper): drop every document of a host if any listed AI agent may not fetch `/`;
  - `url`: keep a document only if every listed agent may fetch its URL.

Parsing is delegated to `protego` (longest match, Allow wins ties, `*` and `$`, percent-encoding, group
merging). Measured against Google's robots.txt rules (RFC 9309 and google/robotstxt), protego 0.7 differs on
four points that matter here; `normalize_for_agent` rewrites the file so protego gives Google's answer:
  1. a UTF-8 byte-order mark makes the first `User-agent` line unreadable (Google strips it);
  2. `User-agent: GPTBot/1.0` does not apply to GPTBot (Google keeps the product token `GPTBot`);
  3. a group's agent is matched as a prefix, so `User-agent: Applebot` rules apply to Applebot-Extended
     (Google and RFC 9309 match the whole product token, case-insensitively);
  4. a `Crawl-delay`, `Sitemap` or unknown line between two `User-agent` lines splits the group
     (Google only ends a group at an Allow/Disallow rule).
tests/prep/test_robots.py holds one case per point.
"""

import json
import os
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from urllib.parse import urlsplit

from protego import Protego

# Apertus Appendix B, as listed in docs/recipe.md 7.
AI_AGENTS = (
    "GPTBot",
    "CCBot",
    "Google-Extended",
    "ClaudeBot",
    "Bytespider",
    "Applebot-Extended",
    "Diffbot",
    "Meta-ExternalAgent",
    "AI2Bot",
    "cohere-training-data-crawler",
    "PanguBot",
)
MODES = ("domain", "url")

_USER_AGENT_KEYS = {"user-agent", "useragent", "user agent"}
_RULE_KEYS = {"allow", "disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw"}
_PRODUCT_TOKEN = re.compile(r"[A-Za-z_-]*")
_OTHER_AGENT = "x-other-agent"


def normalize_for_agent(robots_txt: str, agent: str) -> str:
    """Rewrite `robots_txt` so that protego's answer for `agent` follows Google's rules (points 1-4 above).

    Keeps only `User-agent`, `Allow` and `Disallow` lines; a `User-agent` value becomes `agent` if its
    product token equals `agent` case-insensitively, stays `*` if it is `*`, and becomes a placeholder
    otherwise, so no other group can be matched by prefix.
    """
    kept = []
    for line in robots_txt.lstrip("\ufeff").splitlines():
        line = line.split("#", 1)[0]
        if ":" not in line:
            continue
        key, value = (part.strip() for part in line.split(":", 1))
        key = key.lower()
        if key in _USER_AGENT_KEYS:
            if value == "*" or (value.startswith("*") and value[1].isspace()):
                value = "*"
            else:
                token = _PRODUCT_TOKEN.match(value).group()
                value = agent if token and token.lower() == agent.lower() else _OTHER_AGENT
            kept.append(f"User-agent: {value}")
        elif key in _RULE_KEYS:
            kept.append(f"{'Allow' if key == 'allow' else 'Disallow'}: {value}")
    return "\n".join(kept)


@lru_cache(maxsize=65536)
def _parser(robots_txt: str, agent: str) -> Protego:
    return Protego.parse(normalize_for_agent(robots_txt, agent))


def blocked_agents(robots_txt: str | None, url: str, agents: Iterable[str] = AI_AGENTS) -> list[str]:
    """Agents of `agents` that may not fetch `url` under `robots_txt` (None: no file, everything allowed).

    Args:
      robots_txt: text of the host's robots.txt, or None when it is missing or unreachable.
      url: absolute URL (`https://host/path?query`); in `domain` mode pass the host root `https://host/`.
    Returns: blocked agent names, in the order of `agents`.
    """
    if robots_txt is None:
        return []
    return [agent for agent in agents if not _parser(robots_txt, agent).can_fetch(url, agent)]


def host_of(url: str) -> str:
    """Lower-cased host of an absolute URL, without port; '' if the URL has none."""
    return (urlsplit(url).hostname or "").lower()


class RobotsSnapshot(Mapping):
    """Host -> robots.txt text, loaded from a directory or a JSONL file.

    Directory: one file per host, named `<host>.txt` or `<host>/robots.txt`, read as UTF-8 with invalid
    bytes replaced. JSONL: one object per line, `{"domain": host, "robots_txt": text}`; a missing or null
    `robots_txt` means the file was unavailable (allowed). Lookups fall back between `www.host` and `host`.

    Raises:
      FileNotFoundError: the path does not exist.
      ValueError: a JSONL line is not JSON, or not an object with a string `domain`.
    """

    def __init__(self, path: str):
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"robots.txt snapshot {path!r} not found; build one with experiments/fetch_robots.py"
            )
        self.path = path
        self._files = self._load_dir(path) if os.path.isdir(path) else self._load_jsonl(path)

    @staticmethod
    def _load_dir(path: str) -> dict[str, str]:
        files = {}
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            if os.path.isdir(full) and os.path.isfile(os.path.join(full, "robots.txt")):
                full, host = os.path.join(full, "robots.txt"), name
            elif name.endswith(".txt"):
                host = name[: -len(".txt")]
            else:
                continue
            with open(full, "rb") as f:
                files[host.lower()] = f.read().decode("utf-8", errors="replace")
        return files

    @staticmethod
    def _load_jsonl(path: str) -> dict[str, str]:
        files = {}
        with open(path, encoding="utf-8") as f:
            for line_no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError as error:
                    raise ValueError(f"{path}:{line_no}: not JSON ({error.msg})") from None
                if not isinstance(entry, dict) or not isinstance(entry.get("domain"), str):
                    raise ValueError(f'{path}:{line_no}: expected {{"domain": str, "robots_txt": str|null}}')
                if isinstance(entry.get("robots_txt"), str):
                    files[entry["domain"].lower()] = entry["robots_txt"]
        return files

    def __getitem__(self, host: str) -> str:
        host = host.lower()
        for key in (host, host.removeprefix("www."), "www." + host):
            if key in self._files:
                return self._files[key]
        raise KeyError(host)

    def __iter__(self):
        return iter(self._files)

    def __len__(self):
        return len(self._files)


def check_document(
    url: str, snapshot: Mapping[str, str], mode: str, agents: Iterable[str] = AI_AGENTS
) -> list[str]:
    """Agents that exclude the document at `url` under `mode` ('domain' or 'url'); empty list = keep.

    Raises:
      ValueError: unknown mode.
    """
    if mode not in MODES:
        raise ValueError(f"robots mode {mode!r} unknown; use one of {MODES}")
    host = host_of(url)
    robots_txt = snapshot.get(host) if host else None
    target = f"{urlsplit(url).scheme or 'https'}://{host}/" if mode == "domain" else url
    return blocked_agents(robots_txt, target, tuple(agents))
