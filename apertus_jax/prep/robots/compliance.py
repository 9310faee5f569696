"""Retroactive robots.txt compliance (Apertus 3.1.1, docs/recipe.md 7): today's robots.txt decides for every crawl year.

A snapshot maps a host to the text of its current robots.txt. A host without an entry (no file, 4xx,
unreachable) is allowed: the opt-out reading of the paper. Two modes:
  - `domain` (the paper): drop every document of a host if any listed AI agent may not fetch `/`;
  - `url`: keep a document only if every listed agent may fetch its URL.

Matching is delegated to `protego` (longest match, Allow wins ties, `*` and `$`, percent-encoding, group
merging). The reference for parsing is Google's open-source robots.txt parser (google/robotstxt, robots.cc,
and RFC 9309); protego 0.7 reads some files differently, so `normalize_for_agent` first re-reads the file
line by line the way Google's parser does and hands protego a clean file that gives Google's answer:
  1. a UTF-8 byte-order mark, or the start of one (bytes EF BB or EF), before the first line is skipped;
  2. lines end at LF, CR or CRLF only, and a line is cut after 16,663 bytes (Google's 8 x 2083 buffer);
  3. a line without a colon is read as `key value` when it has exactly two words (`Disallow /`);
  4. keys are matched as case-insensitive prefixes with Google's accepted typos (`useragent`,
     `dissallow`, ...); only User-agent, Allow and Disallow lines are kept, so a `Crawl-delay`, `Sitemap`
     or unknown line between two `User-agent` lines does not split the group;
  5. `User-agent: GPTBot/1.0` applies to GPTBot (the product token `[A-Za-z_-]*` is compared), and a
     group's agent must equal the crawler's name case-insensitively, so `User-agent: Applebot` rules do
     not apply to Applebot-Extended (protego matches it as a prefix).
A document's URL is read as Google's parser reads it (`split_url`, robots.cc GetPathParamsQuery): a URL
without a scheme (`example.com/a`, `//example.com/a`) still names its host, and the fragment is dropped.
docs/robots.md lists the cases where the project deliberately reads a file differently from Google's
parser; tests/prep/robots/test_compliance.py holds a table of Google's parsing behaviour.
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

_USER_AGENT_PREFIXES = ("user-agent", "useragent", "user agent")
_DISALLOW_PREFIXES = ("disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw")
_PRODUCT_TOKEN = re.compile(r"[A-Za-z_-]*")
_OTHER_AGENT = "x-other-agent"
_UTF8_BOM = b"\xef\xbb\xbf"
_MAX_LINE_BYTES = 2083 * 8 - 1  # Google keeps this many bytes of a line and drops the rest
_ASCII_WHITESPACE = " \t\n\v\f\r"
_LINE_END = re.compile(r"\r\n|\r|\n")
# Characters that protego's `str.splitlines` would take as line ends but Google's parser keeps in the value.
_HIDDEN_LINE_ENDS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_PATH_START = re.compile("[/?;]")
# protego reads the path from a URL; with an authority before it, a path that starts with "//" stays a path.
_MATCH_ORIGIN = "http://robots.invalid"


def decode_robots_txt(body: bytes) -> str:
    """The text of a robots.txt body: a leading UTF-8 byte-order mark, or any prefix of one (EF, EF BB), is
    skipped as Google's parser does, then the bytes are decoded as UTF-8 with invalid bytes replaced."""
    skip = 0
    while skip < len(_UTF8_BOM) and skip < len(body) and body[skip] == _UTF8_BOM[skip]:
        skip += 1
    return body[skip:].decode("utf-8", errors="replace")


def _key_and_value(line: str) -> tuple[str, str] | None:
    """Google's split of one line (robots.cc GetKeyAndValueFrom): comment removed, `key: value`, or
    `key value` when a colon is missing and the line has exactly two words; None if the line has no rule."""
    line = line.split("#", 1)[0].strip(_ASCII_WHITESPACE)
    if not line:
        return None
    if ":" in line:
        key, value = line.split(":", 1)
    else:
        words = line.replace("\t", " ").split(" ")
        words = [w for w in words if w]
        if len(words) != 2:
            return None
        key, value = words
    key = key.strip(_ASCII_WHITESPACE)
    return (key, value.strip(_ASCII_WHITESPACE)) if key else None


def normalize_for_agent(robots_txt: str, agent: str) -> str:
    """Rewrite `robots_txt` so that protego's answer for `agent` follows Google's rules (points 1-5 above).

    Keeps only `User-agent`, `Allow` and `Disallow` lines; a `User-agent` value becomes `agent` if its
    product token equals `agent` case-insensitively, stays `*` if it is `*`, and becomes a placeholder
    otherwise, so no other group can be matched by prefix. A text that starts with U+FEFF or U+FFFD (a
    byte-order mark, or a partial one decoded with replacement before it reached us) has that one
    character dropped (docs/robots.md).
    """
    if robots_txt[:1] in ("\ufeff", "\ufffd"):
        robots_txt = robots_txt[1:]
    kept = []
    for line in _LINE_END.split(robots_txt):
        encoded = line.encode("utf-8", errors="surrogatepass")
        if len(encoded) > _MAX_LINE_BYTES:
            line = encoded[:_MAX_LINE_BYTES].decode("utf-8", errors="ignore")
        parsed = _key_and_value(line)
        if parsed is None:
            continue
        key = parsed[0].lower()
        value = _HIDDEN_LINE_ENDS.sub(lambda m: "".join(f"%{b:02X}" for b in m[0].encode()), parsed[1])
        if key.startswith(_USER_AGENT_PREFIXES):
            if value == "*" or (value.startswith("*") and value[1] in _ASCII_WHITESPACE):
                value = "*"
            else:
                token = _PRODUCT_TOKEN.match(value).group()
                value = agent if token and token.lower() == agent.lower() else _OTHER_AGENT
            kept.append(f"User-agent: {value}")
        elif key.startswith("allow"):
            kept.append(f"Allow: {value}")
        elif key.startswith(_DISALLOW_PREFIXES):
            kept.append(f"Disallow: {value}")
    return "\n".join(kept)


@lru_cache(maxsize=65536)
def _parser(robots_txt: str, agent: str) -> Protego:
    return Protego.parse(normalize_for_agent(robots_txt, agent))


def split_url(url: str) -> tuple[str, str]:
    """(host, path) of `url` as Google's parser reads a URL (google/robotstxt robots.cc, GetPathParamsQuery).

    Two leading slashes are skipped; "://" ends a scheme only if no "/", "?" or ";" comes before it; the path
    starts at the first "/", "?" or ";" after the scheme (or at the start), so `example.com/a` is host
    `example.com`, path `/a`, and `a/b` is host `a`, path `/b`. The path runs to the first "#" (the fragment
    is dropped) and gets a leading "/" when it starts with "?" or ";"; a URL without a path, or with a "#"
    before it, has path "/". The host is what lies between the scheme and the path (or the "#"), without
    user info and port, lower-cased; '' for a URL that starts with its path ("/a").

    Returns:
      `(host, path)`: the host to look up in a snapshot and the path, params and query rules match.
    """
    start = 2 if url.startswith("//") else 0
    early = _PATH_START.search(url, start)
    scheme_end = url.find("://", start)
    if scheme_end < 0 or (early and early.start() < scheme_end):
        authority_start = start
    else:
        authority_start = scheme_end + 3
    path_match = _PATH_START.search(url, authority_start)
    hash_at = url.find("#", start)
    path_start = path_match.start() if path_match else len(url)
    authority_end = path_start if hash_at < 0 else min(path_start, max(hash_at, authority_start))
    try:
        host = urlsplit("//" + url[authority_start:authority_end]).hostname or ""
    except ValueError:  # an unbalanced "[" of an IPv6 literal: no host to look up
        host = ""
    if not path_match or 0 <= hash_at < path_start:
        return host.lower(), "/"
    path = url[path_start : hash_at if hash_at >= 0 else len(url)]
    return host.lower(), path if path.startswith("/") else "/" + path


def blocked_agents(robots_txt: str | None, url: str, agents: Iterable[str] = AI_AGENTS) -> list[str]:
    """Agents of `agents` that may not fetch `url` under `robots_txt` (None: no file, everything allowed).

    Args:
      robots_txt: text of the host's robots.txt, or None when it is missing or unreachable.
      url: the document's URL, with or without a scheme (`https://host/path?query`, `host/path`), or a path;
        rules match its path as `split_url` extracts it. In `domain` mode pass the host root.
    Returns: blocked agent names, in the order of `agents`.
    """
    if robots_txt is None:
        return []
    target = _MATCH_ORIGIN + split_url(url)[1]
    return [agent for agent in agents if not _parser(robots_txt, agent).can_fetch(target, agent)]


def host_of(url: str) -> str:
    """Lower-cased host of `url` as `split_url` reads it (scheme optional), without port; '' if it has none."""
    return split_url(url)[0]


class RobotsSnapshot(Mapping):
    """Host -> robots.txt text, loaded from a directory or a JSONL file.

    Directory: one file per host, named `<host>.txt` or `<host>/robots.txt`, read with `decode_robots_txt`
    (byte-order mark skipped, UTF-8 with invalid bytes replaced). JSONL: one object per line,
    `{"domain": host, "robots_txt": text}`; a missing or null `robots_txt` means the file was unavailable
    (allowed). Lookups fall back between `www.host` and `host`.

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
                files[host.lower()] = decode_robots_txt(f.read())
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
    host, path = split_url(url)
    robots_txt = snapshot.get(host) if host else None
    return blocked_agents(robots_txt, "/" if mode == "domain" else path, tuple(agents))
