"""Retroactive robots.txt opt-outs (Apertus 3.1.1; docs/robots.md): today's robots.txt decides for every crawl.

- `compliance`: a document checked against its host's robots.txt for the AI agents;
- `fetch`: robots.txt snapshots of many hosts (`experiments.fetch_robots`).
"""
