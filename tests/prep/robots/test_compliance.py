"""Retroactive robots.txt: a case table (Google's rules) per agent and mode, and the snapshot loaders."""

import json

import pytest
from protego import Protego

from apertus_jax.prep.robots.compliance import (
    AI_AGENTS,
    RobotsSnapshot,
    blocked_agents,
    check_document,
    decode_robots_txt,
    host_of,
    split_url,
)

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


# Google's parser (google/robotstxt robots.cc and robots_test.cc): (name, robots.txt as str or raw bytes,
# agent, url, allowed). Bytes go through `decode_robots_txt` as a fetched or stored file does.
MAX_LINE = 2083 * 8


def overlong_disallow():
    """A Disallow line longer than Google's 16,664-byte line buffer; its pattern is cut inside the a's."""
    pattern = "/x/" + "a" * (MAX_LINE - len("disallow: ") - 5)
    return f"user-agent: FooBot\ndisallow: {pattern}/qux\n", pattern


OVERLONG, OVERLONG_PATTERN = overlong_disallow()

GOOGLE_CASES = [
    ("empty file", "", "FooBot", "http://foo.bar/x", True),
    ("colon rules", "user-agent: FooBot\ndisallow: /\n", "FooBot", "http://foo.bar/x/y", False),
    ("unknown keys ignored", "foo: FooBot\nbar: /\n", "FooBot", "http://foo.bar/x/y", True),
    (
        "no colon: whitespace separator",
        "user-agent FooBot\ndisallow /\n",
        "FooBot",
        "http://foo.bar/x/y",
        False,
    ),
    ("no colon star group", "User-agent: *\nDisallow /\n", "FooBot", "http://foo.bar/x", False),
    ("no colon, three words ignored", "User-agent: *\nDisallow / now\n", "FooBot", "http://foo.bar/x", True),
    ("no colon tab separator", "User-agent\tFooBot\nDisallow\t/\n", "FooBot", "http://foo.bar/x", False),
    (
        "rules before any group ignored",
        "allow: /foo/bar/\n\nuser-agent: FooBot\ndisallow: /\n",
        "FooBot",
        "http://foo.bar/foo/bar/",
        False,
    ),
    (
        "groups: allow inside group",
        "user-agent: FooBot\ndisallow: /\nallow: /x/\nuser-agent: BarBot\ndisallow: /\nallow: /y/\n",
        "FooBot",
        "http://foo.bar/x/b",
        True,
    ),
    (
        "groups: other group's allow",
        "user-agent: FooBot\ndisallow: /\nallow: /x/\nuser-agent: BarBot\ndisallow: /\nallow: /y/\n",
        "FooBot",
        "http://foo.bar/y/c",
        False,
    ),
    (
        "groups of one agent merge",
        "user-agent: FooBot\ndisallow: /\nuser-agent: BarBot\nallow: /\n\nuser-agent: FooBot\nallow: /z/\n",
        "FooBot",
        "http://foo.bar/z/d",
        True,
    ),
    (
        "empty group line joins next",
        "user-agent: BazBot\n\nuser-agent: FooBot\nallow: /z/\ndisallow: /\n",
        "BazBot",
        "http://foo.bar/y",
        False,
    ),
    (
        "sitemap does not end group",
        "User-agent: BarBot\nSitemap: https://foo.bar/sitemap\nUser-agent: *\nDisallow: /\n",
        "BarBot",
        "http://foo.bar/",
        False,
    ),
    (
        "unknown line does not end group",
        "User-agent: FooBot\nInvalid-Unknown-Line: unknown\nUser-agent: *\nDisallow: /\n",
        "FooBot",
        "http://foo.bar/",
        False,
    ),
    (
        "key case upper",
        "USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n",
        "FooBot",
        "http://foo.bar/a/b",
        False,
    ),
    (
        "key case camel allow",
        "uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n",
        "FooBot",
        "http://foo.bar/x/y",
        True,
    ),
    (
        "agent value case-insensitive",
        "User-Agent: FOO BAR\nAllow: /x/\nDisallow: /\n",
        "foo",
        "http://foo.bar/a/b",
        False,
    ),
    (
        "agent up to first space",
        "User-Agent: *\nDisallow: /\nUser-Agent: Foo Bar\nAllow: /x/\nDisallow: /\n",
        "Foo",
        "http://foo.bar/x/y",
        True,
    ),
    ("agent with version", "User-agent: FooBot/1.2\nDisallow: /\n", "FooBot", "http://foo.bar/a", False),
    ("agent prefix is not a match", "User-agent: Foo\nDisallow: /\n", "FooBot", "http://foo.bar/a", True),
    (
        "star with trailing text is global",
        "User-agent: * everything\nDisallow: /\n",
        "FooBot",
        "http://foo.bar/a",
        False,
    ),
    (
        "specific beats global",
        "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n",
        "FooBot",
        "http://foo.bar/x/y",
        False,
    ),
    (
        "global for others",
        "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n",
        "BarBot",
        "http://foo.bar/x/y",
        True,
    ),
    (
        "no matching group, no star",
        "user-agent: FooBot\nallow: /\nuser-agent: BarBot\ndisallow: /\n",
        "QuxBot",
        "http://foo.bar/x/y",
        True,
    ),
    (
        "specific group ignores global",
        "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n",
        "FooBot",
        "http://foo.bar/x/page",
        True,
    ),
    ("path case-sensitive", "user-agent: FooBot\ndisallow: /X/\n", "FooBot", "http://foo.bar/x/y", True),
    (
        "longest match disallow",
        "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/\n",
        "FooBot",
        "http://foo.bar/x/page.html",
        False,
    ),
    (
        "longest match allow",
        "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n",
        "FooBot",
        "http://foo.bar/x/page.html",
        True,
    ),
    (
        "longest match allow, dir",
        "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n",
        "FooBot",
        "http://foo.bar/x/",
        False,
    ),
    (
        "tie: empty patterns",
        "user-agent: FooBot\ndisallow: \nallow: \n",
        "FooBot",
        "http://foo.bar/x/page.html",
        True,
    ),
    (
        "tie: slash",
        "user-agent: FooBot\ndisallow: /\nallow: /\n",
        "FooBot",
        "http://foo.bar/x/page.html",
        True,
    ),
    (
        "tie: same path",
        "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/page.html\n",
        "FooBot",
        "http://foo.bar/x/page.html",
        True,
    ),
    (
        "tie: equal length wildcard",
        "user-agent: FooBot\nallow: /folder\ndisallow: /folder\n",
        "FooBot",
        "http://example.com/folder/page",
        True,
    ),
    (
        "longer without trailing slash",
        "user-agent: FooBot\ndisallow: /x\nallow: /x/\n",
        "FooBot",
        "http://foo.bar/x",
        False,
    ),
    (
        "wildcard longer wins",
        "user-agent: FooBot\nallow: /page\ndisallow: /*.html\n",
        "FooBot",
        "http://foo.bar/page.html",
        False,
    ),
    (
        "wildcard shorter loses",
        "user-agent: FooBot\nallow: /x/page.\ndisallow: /*.html\n",
        "FooBot",
        "http://foo.bar/x/page.html",
        True,
    ),
    (
        "wildcard in middle",
        "User-agent: FooBot\nDisallow: /foo/bar/quz\nAllow: /foo/*/qux\n",
        "FooBot",
        "http://foo.bar/foo/bar/quz",
        False,
    ),
    (
        "wildcard empty segment",
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/*/qux\n",
        "FooBot",
        "http://foo.bar/foo//qux",
        True,
    ),
    (
        "dollar anchors",
        "User-agent: FooBot\nDisallow: /foo/bar$\nAllow: /foo/bar/qux\n",
        "FooBot",
        "http://foo.bar/foo/bar",
        False,
    ),
    (
        "dollar anchors, longer path",
        "User-agent: FooBot\nDisallow: /foo/bar$\n",
        "FooBot",
        "http://foo.bar/foo/bar/baz",
        True,
    ),
    (
        "star dot php dollar, query",
        "user-agent: FooBot\ndisallow: /\nallow: /*.php$\n",
        "FooBot",
        "http://foo.bar/filename.php?parameters",
        False,
    ),
    (
        "star dot php dollar",
        "user-agent: FooBot\ndisallow: /\nallow: /*.php$\n",
        "FooBot",
        "http://foo.bar/folder/filename.php",
        True,
    ),
    (
        "star dot php case",
        "user-agent: FooBot\ndisallow: /\nallow: /*.php\n",
        "FooBot",
        "http://foo.bar/windows.PHP",
        False,
    ),
    (
        "allow slash dollar",
        "user-agent: FooBot\nallow: /$\ndisallow: /\n",
        "FooBot",
        "http://example.com/",
        True,
    ),
    (
        "allow slash dollar, page",
        "user-agent: FooBot\nallow: /$\ndisallow: /\n",
        "FooBot",
        "http://example.com/page.html",
        False,
    ),
    (
        "fish star equals fish",
        "user-agent: FooBot\ndisallow: /\nallow: /fish*\n",
        "FooBot",
        "http://foo.bar/fishheads/yummy.html",
        True,
    ),
    (
        "query is part of path",
        "user-agent: FooBot\ndisallow: /\nallow: /fish\n",
        "FooBot",
        "http://foo.bar/?id=fish",
        False,
    ),
    (
        "comment in value",
        "User-agent: FooBot\n# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n",
        "FooBot",
        "http://foo.bar/foo/quz",
        False,
    ),
    (
        "comment line not a rule",
        "User-agent: FooBot\n# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n",
        "FooBot",
        "http://foo.bar/foo/bar",
        True,
    ),
    (
        "query with url stays",
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar?qux=taz&baz=http://foo.bar?tar&par\n",
        "FooBot",
        "http://foo.bar/foo/bar?qux=taz&baz=http://foo.bar?tar&par",
        True,
    ),
    (
        "utf-8 pattern vs encoded url",
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/ツ\n",
        "FooBot",
        "http://foo.bar/foo/bar/%E3%83%84",
        True,
    ),
    (
        "encoded pattern vs encoded url",
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%E3%83%84\n",
        "FooBot",
        "http://foo.bar/foo/bar/%E3%83%84",
        True,
    ),
    (
        "lowercase escape normalized",
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%e3%83%84\n",
        "FooBot",
        "http://foo.bar/foo/bar/%E3%83%84",
        True,
    ),
    (
        "index.html allows dir",
        "User-Agent: *\nAllow: /allowed-slash/index.html\nDisallow: /\n",
        "foobot",
        "http://foo.com/allowed-slash/",
        True,
    ),
    (
        "index.html not index.htm",
        "User-Agent: *\nAllow: /allowed-slash/index.html\nDisallow: /\n",
        "foobot",
        "http://foo.com/allowed-slash/index.htm",
        False,
    ),
    ("CRLF", "User-agent: FooBot\r\nDisallow: /\r\n", "FooBot", "http://foo.bar/a", False),
    ("CR only", "User-agent: FooBot\rAllow: /x\rDisallow: /\r", "FooBot", "http://foo.bar/a", False),
    ("CR only allow", "User-agent: FooBot\rAllow: /x\rDisallow: /\r", "FooBot", "http://foo.bar/x", True),
    (
        "mixed line ends, no final newline",
        "User-Agent: foo\nAllow: /some/path\r\nUser-Agent: FooBot\n\r\n\nDisallow: /",
        "FooBot",
        "http://foo.bar/a",
        False,
    ),
    (
        "form feed is not a line end",
        "User-agent: FooBot\nDisallow: /a\x0cDisallow: /\n",
        "FooBot",
        "http://foo.bar/b",
        True,
    ),
    ("full BOM", b"\xef\xbb\xbfUser-agent: *\nDisallow: /\n", "FooBot", "http://foo.bar/a", False),
    ("partial BOM EF BB", b"\xef\xbbUser-agent: *\nDisallow: /\n", "FooBot", "http://foo.bar/a", False),
    ("partial BOM EF", b"\xefUser-agent: *\nDisallow: /\n", "FooBot", "http://foo.bar/a", False),
    (
        "BOM mid-file breaks the line",
        b"User-agent: *\n\xef\xbb\xbfDisallow: /\n",
        "FooBot",
        "http://foo.bar/a",
        True,
    ),
    ("typo keys", "useragent: FooBot\ndissallow: /\n", "FooBot", "http://foo.bar/a", False),
    ("key prefix match", "User-agents: FooBot\nDisallows: /\n", "FooBot", "http://foo.bar/a", False),
    (
        "overlong line cut: matches cut rule",
        OVERLONG,
        "FooBot",
        "http://foo.bar" + OVERLONG_PATTERN + "/fux",
        False,
    ),
    ("overlong line cut: other url", OVERLONG, "FooBot", "http://foo.bar/fux", True),
    ("fragment ignored", "User-agent: FooBot\nDisallow: /a$\n", "FooBot", "http://foo.bar/a#frag", False),
    ("non-ascii agent value", "User-agent: ツBot\nDisallow: /\n", "FooBot", "http://foo.bar/a", True),
]


def as_text(robots_txt):
    return decode_robots_txt(robots_txt) if isinstance(robots_txt, bytes) else robots_txt


@pytest.mark.parametrize("name,robots_txt,agent,url,allowed", GOOGLE_CASES, ids=[c[0] for c in GOOGLE_CASES])
def test_google_parser_table(name, robots_txt, agent, url, allowed):
    assert (not blocked_agents(as_text(robots_txt), url, (agent,))) == allowed


def google_allows(robots_txt, agent, url):
    """The verdict of Google's C++ parser (python bindings `fast-robotstxt`, import name `robotstxt`)."""
    robots = pytest.importorskip("robotstxt.robots")
    matcher = robots.RobotsMatcher()
    body = robots_txt if isinstance(robots_txt, bytes) else robots_txt.encode()
    agent_bytes, url_bytes = agent.encode(), url.encode()
    verdict = robots._lib.robots_allowed_by_robots(
        matcher._ptr, body, len(body), agent_bytes, len(agent_bytes), url_bytes, len(url_bytes)
    )
    return bool(verdict)


@pytest.mark.parametrize("name,robots_txt,agent,url,allowed", GOOGLE_CASES, ids=[c[0] for c in GOOGLE_CASES])
def test_table_agrees_with_googles_parser(name, robots_txt, agent, url, allowed):
    """Cross-check of the table itself against Google's C++ parser."""
    assert google_allows(robots_txt, agent, url) == allowed


def test_table_is_large_enough():
    assert len(GOOGLE_CASES) >= 40


# Deliberate differences from Google's parser (docs/robots.md): (name, robots.txt, url, Google allows, we allow).
DIFFERENCES = [
    # RFC 3986: %62%61%7A and "baz" are the same path; Google compares the strings.
    (
        "encoded unreserved characters",
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%62%61%7A\n",
        "http://foo.bar/foo/bar/baz",
        False,
        True,
    ),
    # Crawl URLs are stored unencoded; we percent-encode them before matching, Google leaves that to its caller.
    (
        "unencoded URL",
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/ツ\n",
        "http://foo.bar/foo/bar/ツ",
        False,
        True,
    ),
    # A text that starts with U+FFFD lost its first bytes to a decoder; we read it as a broken BOM (stricter).
    ("leading replacement character", b"\xffUser-agent: *\nDisallow: /\n", "http://foo.bar/a", True, False),
]


@pytest.mark.parametrize("name,robots_txt,url,google,ours", DIFFERENCES, ids=[c[0] for c in DIFFERENCES])
def test_deliberate_differences(name, robots_txt, url, google, ours):
    """`google` is upstream's answer (robots_test.cc ID_Encoding for the first two, robots.cc key matching
    for the third); the python bindings percent-normalize URLs themselves, so they are not asked here."""
    assert google != ours
    assert (not blocked_agents(as_text(robots_txt), url, ("FooBot",))) == ours


@pytest.mark.parametrize(
    "body", [b"\xef\xbb\xbfUser-agent: *\n", b"\xef\xbbUser-agent: *\n", b"\xefUser-agent: *\n"]
)
def test_decode_skips_a_full_or_partial_byte_order_mark(body):
    assert decode_robots_txt(body) == "User-agent: *\n"
    # Only a prefix of the mark is skipped: EF 11 BF loses EF, as in Google's parser.
    assert decode_robots_txt(b"\xef\x11\xbfUser-agent: *\n") == "\x11\ufffdUser-agent: *\n"


def test_snapshot_directory_skips_a_partial_byte_order_mark(tmp_path):
    (tmp_path / "h.txt").write_bytes(b"\xef\xbbUser-agent: *\nDisallow /\n")
    assert check_document("https://h/a", RobotsSnapshot(str(tmp_path)), "domain") == list(AI_AGENTS)


def test_partial_byte_order_mark_decoded_with_replacement_still_blocks():
    """Snapshots written before `decode_robots_txt` hold a partial mark as U+FFFD: the file still counts."""
    text = b"\xef\xbbUser-agent: *\nDisallow: /\n".decode("utf-8", errors="replace")
    assert text.startswith("\ufffd")
    assert blocked_agents(text, "https://h/") == list(AI_AGENTS)


# Google's path extraction, robots_test.cc TestGetPathParamsQuery: URL -> the path, params and query that rules
# match (no scheme: the text up to the first "/", "?" or ";" is the host; the fragment is dropped).
GOOGLE_PATHS = [
    ("", "/"),
    ("http://www.example.com", "/"),
    ("http://www.example.com/", "/"),
    ("http://www.example.com/a", "/a"),
    ("http://www.example.com/a/", "/a/"),
    ("http://www.example.com/a/b?c=http://d.e/", "/a/b?c=http://d.e/"),
    ("http://www.example.com/a/b?c=d&e=f#fragment", "/a/b?c=d&e=f"),
    ("example.com", "/"),
    ("example.com/", "/"),
    ("example.com/a", "/a"),
    ("example.com/a/", "/a/"),
    ("example.com/a/b?c=d&e=f#fragment", "/a/b?c=d&e=f"),
    ("a", "/"),
    ("a/", "/"),
    ("/a", "/a"),
    ("a/b", "/b"),
    ("example.com?a", "/?a"),
    ("example.com/a;b#c", "/a;b"),
    ("//a/b/c", "/b/c"),
]


@pytest.mark.parametrize("url,path", GOOGLE_PATHS)
def test_path_is_the_one_googles_parser_matches(url, path):
    assert split_url(url)[1] == path


# URLs without a scheme and with fragments: (name, robots.txt, url, Google allows FooBot).
URL_CASES = [
    ("no scheme: path matched", "User-agent: FooBot\nDisallow: /a\n", "example.com/a", False),
    ("no scheme: other path", "User-agent: FooBot\nDisallow: /a\n", "example.com/b", True),
    ("no scheme: first segment is the host", "User-agent: FooBot\nDisallow: /b\n", "a/b", False),
    ("no scheme: host is not in the path", "User-agent: FooBot\nDisallow: /example\n", "example.com/x", True),
    ("two slashes: host skipped", "User-agent: FooBot\nDisallow: /b/c\n", "//a/b/c", False),
    ("two slashes: host is not a path", "User-agent: FooBot\nDisallow: /a/\n", "//a/b/c", True),
    ("no scheme: query right after the host", "User-agent: FooBot\nDisallow: /?a\n", "example.com?a", False),
    (
        "no scheme: fragment dropped",
        "User-agent: FooBot\nDisallow: /a/b?c=d&e=f$\n",
        "example.com/a/b?c=d&e=f#g",
        False,
    ),
    ("no scheme: params kept", "User-agent: FooBot\nDisallow: /a;b$\n", "example.com/a;b#c", False),
    ("fragment before the path", "User-agent: FooBot\nDisallow: /x\n", "example.com#top/x", True),
    ("fragment before the path: root", "User-agent: FooBot\nDisallow: /$\n", "example.com#top/x", False),
    (
        "scheme: fragment before the path",
        "User-agent: FooBot\nDisallow: /x\n",
        "http://example.com#top/x",
        True,
    ),
    (
        "scheme: fragment dropped",
        "User-agent: FooBot\nDisallow: /a$\n",
        "https://example.com/a#Artikel_1",
        False,
    ),
    (
        "scheme: query with a URL in it",
        "User-agent: FooBot\nDisallow: /a/b?c=http://d.e/$\n",
        "http://example.com/a/b?c=http://d.e/",
        False,
    ),
    ("double slash path", "User-agent: FooBot\nDisallow: //x\n", "example.com//x", False),
    ("scheme in capitals", "User-agent: FooBot\nDisallow: /a\n", "HTTPS://Example.com/a", False),
    ("user info", "User-agent: FooBot\nDisallow: /p\n", "ftp://user@example.com/p", False),
]


@pytest.mark.parametrize("name,robots_txt,url,allowed", URL_CASES, ids=[c[0] for c in URL_CASES])
def test_urls_without_scheme_or_with_fragments(name, robots_txt, url, allowed):
    assert (not blocked_agents(robots_txt, url, ("FooBot",))) == allowed


@pytest.mark.parametrize("name,robots_txt,url,allowed", URL_CASES, ids=[c[0] for c in URL_CASES])
def test_url_table_agrees_with_googles_parser(name, robots_txt, url, allowed):
    assert google_allows(robots_txt, "FooBot", url) == allowed


# fast-robotstxt 1.1.0 reads URLs with the ada-url (WHATWG) parser instead of robots.cc's GetPathParamsQuery;
# on these URLs the two differ, and we follow robots.cc: (name, robots.txt, url, robots.cc allows FooBot).
BINDINGS_DIFFER = [
    # robots.cc: path "/a"; ada reads "example.com" as a scheme and "8080/a" as an opaque path.
    ("port without a scheme", "User-agent: FooBot\nDisallow: /a\n", "example.com:8080/a", False),
    # robots.cc: path "/;x"; ada reads "example.com;x" as the host.
    ("params right after the host", "User-agent: FooBot\nDisallow: /;x\n", "example.com;x", False),
    # robots.cc keeps the "?" of an empty query (path "/a?"); ada drops it.
    ("empty query", "User-agent: FooBot\nDisallow: /a?$\n", "example.com/a?#x", False),
]


@pytest.mark.parametrize("name,robots_txt,url,allowed", BINDINGS_DIFFER, ids=[c[0] for c in BINDINGS_DIFFER])
def test_urls_the_bindings_read_otherwise_follow_robots_cc(name, robots_txt, url, allowed):
    assert (not blocked_agents(robots_txt, url, ("FooBot",))) == allowed
    assert google_allows(robots_txt, "FooBot", url) != allowed


def test_documents_without_scheme_are_checked_against_their_hosts_file():
    snapshot = {"news.example": "User-agent: GPTBot\nDisallow: /politik/\n"}
    assert check_document("news.example/politik/wahl-2025#kommentare", snapshot, "url") == ["GPTBot"]
    assert check_document("//news.example/politik/", snapshot, "url") == ["GPTBot"]
    assert check_document("news.example/sport/#politik/", snapshot, "url") == []
    closed = {"news.example": "User-agent: *\nDisallow: /\n"}
    assert check_document("News.Example:8080/sport#top", closed, "domain") == list(AI_AGENTS)
    assert host_of("user@News.Example:8080/a") == "news.example"
    assert host_of("/politik/wahl") == ""  # a bare path names no host: no file to apply
    assert check_document("/politik/wahl", closed, "url") == []
