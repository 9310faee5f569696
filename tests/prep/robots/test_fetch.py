"""robots.txt snapshots fetched from a local HTTP server: bodies, statuses, the JSONL that RobotsSnapshot
reads."""

import http.server
import json
import socket
import threading

import pytest

from apertus_jax.prep.robots import fetch as robots_fetch
from apertus_jax.prep.robots.compliance import RobotsSnapshot, blocked_agents

BODIES = {"/robots.txt": b"\xef\xbb\xbfUser-agent: GPTBot\nDisallow: /\n"}


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = BODIES.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.end_headers()
        if body is not None:
            self.wfile.write(body)
        self.server.agents.append(self.headers["User-Agent"])

    def log_message(self, *args):
        pass


@pytest.fixture(name="server")
def fixture_server(monkeypatch):
    monkeypatch.setenv("no_proxy", "*")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.agents = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_fetch_falls_back_to_http_and_skips_the_byte_order_mark(server):
    host = f"127.0.0.1:{server.server_address[1]}"
    entry = robots_fetch.fetch_robots_txt(host, timeout=5, user_agent="test-agent/1")
    assert entry == {"domain": host, "robots_txt": "User-agent: GPTBot\nDisallow: /\n", "status": 200}
    assert server.agents == ["test-agent/1"]  # the https attempt never reached the plain-HTTP server


def test_missing_and_unreachable_files_have_no_body(server, monkeypatch):
    monkeypatch.setitem(BODIES, "/robots.txt", None)
    host = f"127.0.0.1:{server.server_address[1]}"
    assert robots_fetch.fetch_robots_txt(host, timeout=5) == {
        "domain": host,
        "robots_txt": None,
        "status": 404,
    }
    down = f"127.0.0.1:{_closed_port()}"
    assert robots_fetch.fetch_robots_txt(down, timeout=5) == {
        "domain": down,
        "robots_txt": None,
        "status": "unreachable: URLError",
    }


def test_snapshot_is_read_by_robots_snapshot(server, tmp_path):
    up, down = f"127.0.0.1:{server.server_address[1]}", f"127.0.0.1:{_closed_port()}"
    domains = tmp_path / "domains.txt"
    domains.write_text(f"# top hosts\n{up.upper()}\n\n{down}\n{up}\n")
    hosts = robots_fetch.read_hosts(str(domains))
    assert hosts == sorted([up, down])
    out = tmp_path / "robots" / "snapshot.jsonl"
    robots_fetch.write_snapshot(hosts, str(out), threads=2, timeout=5)
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [line["domain"] for line in lines] == hosts
    assert len({line["fetched_at"] for line in lines}) == 1 and lines[0]["fetched_at"].endswith("+00:00")
    assert [p.name for p in out.parent.iterdir()] == ["snapshot.jsonl"]  # no temporary file left
    snapshot = RobotsSnapshot(str(out))
    assert dict(snapshot) == {up: "User-agent: GPTBot\nDisallow: /\n"}
    assert blocked_agents(snapshot[up], "https://news.example/page") == ["GPTBot"]


def test_missing_domains_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="pass a file with one host per line"):
        robots_fetch.read_hosts(str(tmp_path / "domains.txt"))
