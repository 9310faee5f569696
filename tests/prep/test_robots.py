"""Retroactive robots.txt: a case table (Google's rules) per agent and mode, and the snapshot loaders."""

import json

import pytest
from protego import Protego

from apertus_jax.prep.robots import AI_AGENTS, RobotsSnapshot, blocked_agents, check_document

ALL = set(AI_AGENTS)
GARBAGE = b"\x89PNG\r\n\x1a\n\x00\xff\xfe<html><body>502 Bad Gateway</body></html>".decode(
    "utf-8", errors="replace"
)

# (name, robots.txt or None, url, expected blocked agents in `url` mode, expected blocked in `domain` mode)
CASES = [
    ("missing file", None, "https://h/a", set(), set()),
    ("garbage bytes", GARBAGE, "https://h/a", set(), set()),
    ("empty file", "", "https://h/a", set(), set()),
    ("star disallows all", "User-agent: *\nDisallow: /\n", "https://h/a", ALL, ALL),
    (
        "agent group beats star",
        "User-agent: *\nDisallow: /\n\nUser-agent: GPTBot\nAllow: /\n",
        "https://h/a",
        ALL - {"GPTBot"},
        ALL - {"GPTBot"},
    ),
    ("agent-specific block only", "User-agent: GPTBot\nDisallow: /\n", "https://h/a", {"GPTBot"}, {"GPTBot"}),
    (
        "agent names are case-insensitive",
        "user-agent: gptbot\nDISALLOW: /\n",
        "https://h/a",
        {"GPTBot"},
        {"GPTBot"},
    ),
    ("empty Disallow allows all", "User-agent: *\nDisallow:\n", "https://h/a", set(), set()),
    (
        "longer Allow wins",
        "User-agent: *\nDisallow: /docs\nAllow: /docs/public\n",
        "https://h/docs/public/x",
        set(),
        set(),
    ),
    (
        "longer Disallow wins",
        "User-agent: *\nAllow: /docs\nDisallow: /docs/private\n",
        "https://h/docs/private/x",
        ALL,
        set(),
    ),
    ("Allow wins a tie", "User-agent: *\nDisallow: /page\nAllow: /page\n", "https://h/page", set(), set()),
    (
        "wildcard in path",
        "User-agent: CCBot\nDisallow: /*.pdf\n",
        "https://h/files/report.pdf?v=2",
        {"CCBot"},
        set(),
    ),
    (
        "$ anchors the end",
        "User-agent: CCBot\nDisallow: /*.pdf$\n",
        "https://h/files/report.pdf?v=2",
        set(),
        set(),
    ),
    (
        "$ matches at the end",
        "User-agent: CCBot\nDisallow: /*.pdf$\n",
        "https://h/files/report.pdf",
        {"CCBot"},
        set(),
    ),
    ("paths are case-sensitive", "User-agent: *\nDisallow: /Private\n", "https://h/private", set(), set()),
    (
        "comments are ignored",
        "# AI crawlers\nUser-agent: ClaudeBot # Anthropic\nDisallow: / # everything\n",
        "https://h/a",
        {"ClaudeBot"},
        {"ClaudeBot"},
    ),
    (
        "several agents share a group",
        "User-agent: CCBot\nUser-agent: Bytespider\nDisallow: /\n",
        "https://h/a",
        {"CCBot", "Bytespider"},
        {"CCBot", "Bytespider"},
    ),
    (
        "groups of one agent merge",
        "User-agent: Diffbot\nDisallow: /a\n\nUser-agent: Diffbot\nDisallow: /b\n",
        "https://h/b",
        {"Diffbot"},
        set(),
    ),
    (
        "subdirectory only: domain mode keeps",
        "User-agent: GPTBot\nDisallow: /news/\n",
        "https://h/blog/x",
        set(),
        set(),
    ),
    (
        "subdirectory only: url mode drops inside",
        "User-agent: GPTBot\nDisallow: /news/\n",
        "https://h/news/x",
        {"GPTBot"},
        set(),
    ),
    # The four points where protego 0.7 alone differs from Google's parser (see robots.py).
    ("byte-order mark", "\ufeffUser-agent: *\nDisallow: /\n", "https://h/a", ALL, ALL),
    (
        "product token with version",
        "User-agent: GPTBot/1.1\nDisallow: /\n",
        "https://h/a",
        {"GPTBot"},
        {"GPTBot"},
    ),
    ("prefix agent does not match", "User-agent: Applebot\nDisallow: /\n", "https://h/a", set(), set()),
    (
        "crawl-delay does not split a group",
        "User-agent: GPTBot\nCrawl-delay: 10\nUser-agent: CCBot\nDisallow: /\n",
        "https://h/a",
        {"GPTBot", "CCBot"},
        {"GPTBot", "CCBot"},
    ),
]


@pytest.mark.parametrize("mode", ["url", "domain"])
@pytest.mark.parametrize("name,robots_txt,url,blocked_url,blocked_domain", CASES, ids=[c[0] for c in CASES])
def test_case_table(name, robots_txt, url, blocked_url, blocked_domain, mode):
    snapshot = {} if robots_txt is None else {"h": robots_txt}
    expected = blocked_url if mode == "url" else blocked_domain
    assert set(check_document(url, snapshot, mode)) == expected


@pytest.mark.parametrize(
    "robots_txt,agent",
    [("\ufeffUser-agent: *\nDisallow: /\n", "CCBot"), ("User-agent: GPTBot/1.1\nDisallow: /\n", "GPTBot")],
)
def test_protego_alone_differs_from_google(robots_txt, agent):
    """Documents why normalization exists: raw protego allows what Google's rules block."""
    assert Protego.parse(robots_txt).can_fetch("https://h/a", agent)
    assert agent in blocked_agents(robots_txt, "https://h/a")


def test_raw_protego_applies_prefix_group():
    assert not Protego.parse("User-agent: Applebot\nDisallow: /\n").can_fetch(
        "https://h/", "Applebot-Extended"
    )
    assert blocked_agents("User-agent: Applebot\nDisallow: /\n", "https://h/") == []


def test_snapshot_jsonl_and_directory_agree(tmp_path):
    files = {"news.example": "User-agent: GPTBot\nDisallow: /\n", "shop.example": "User-agent: *\nAllow: /\n"}
    jsonl = tmp_path / "robots.jsonl"
    lines = [{"domain": d, "robots_txt": t} for d, t in files.items()]
    lines.append({"domain": "down.example", "robots_txt": None})
    jsonl.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    directory = tmp_path / "robots"
    directory.mkdir()
    (directory / "news.example.txt").write_bytes(files["news.example"].encode())
    (directory / "shop.example").mkdir()
    (directory / "shop.example" / "robots.txt").write_bytes(files["shop.example"].encode())
    for snap in (RobotsSnapshot(str(jsonl)), RobotsSnapshot(str(directory))):
        assert dict(snap) == files
        assert check_document("https://www.news.example/x", snap, "domain") == ["GPTBot"]
        assert check_document("https://shop.example/x", snap, "domain") == []
        assert check_document("https://down.example/x", snap, "domain") == []


def test_snapshot_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="fetch_robots"):
        RobotsSnapshot(str(tmp_path / "nope.jsonl"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('["not", "an", "object"]\n')
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        RobotsSnapshot(str(bad))
    bad.write_text('{"domain": "a.example", "robots_txt": null}\n{"domain": \n')
    with pytest.raises(ValueError, match="bad.jsonl:2: not JSON"):
        RobotsSnapshot(str(bad))
    with pytest.raises(ValueError, match="mode"):
        check_document("https://h/", {}, "host")
