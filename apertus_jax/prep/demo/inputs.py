"""Demo inputs for the preparation pipeline, built only from vendored real text (no network).

- Documents: the demo corpus's train split (UDHR in ~440 languages, German prose: fortunes, Debian Handbook,
  Debian Reference) plus noisy German web text (`assets/de_corpus_extract.jsonl.xz`: npm `de-corpus@0.0.1`,
  MIT; machine-translated reviews, forums and SMS, 5 consecutive sentences per document). Each document gets
  a URL on a fictional host `<source>-<k>.example` (k = sha256 bucket of its id), because the sources have
  none and the robots.txt step needs one.
- A robots.txt snapshot for some of those hosts with policies seen on real sites (block GPTBot and CCBot,
  block every AI crawler, block `/private/` only, allow all, an HTML error page instead of a robots.txt).
- Labeled JSONL for the four heads. These labels are PROXIES, not human or LLM judgments:
  toxicity = a German profanity lexicon match (a weak annotator); coherence = real text (1) vs the same
  kind of text with its words shuffled (0); information value = technical documentation paragraphs (1) vs
  quotes, poems and web chatter (0); educational quality = regression target 3 (Debian Handbook, a
  textbook), 2 (Debian Reference), 0 (quotes, poems, web chatter). Quotes come from the held-out split and
  web sentences from other de-corpus files than the documents; the 240 Handbook and Reference documents are
  too few to hold out, so their paragraphs are also scored later (the demo shows the mechanics, not accuracy).
"""

import hashlib
import importlib.resources
import json
import lzma
import random
import re

from apertus_jax import files
from apertus_jax.data.demo_corpus import load_demo_documents, load_german_prose

TOXIC_LEXICON = re.compile(
    r"\b(schei(ß|ss)\w*|arschloch\w*|idiot\w*|vollidiot\w*|verdammt\w*|dumm\w*|hure\w*|fick\w*|wichser\w*|"
    r"bastard\w*|blöd\w*|mist|trottel\w*|depp\w*|kacke|schlampe\w*|verreck\w*|penner\w*|miststück|"
    r"halt die klappe|fresse)\b"
)
HOSTS_PER_SOURCE = 8
WEB_SENTENCES_PER_DOC = 5
_DOC_FILES = ("doc-0.json", "doc-1.json")  # de-corpus files used as documents; the others only for labels

DEMO_ROBOTS = {
    "udhr-1.example": "User-agent: GPTBot\nDisallow: /\n\nUser-agent: CCBot\nDisallow: /\n",
    "german_prose-2.example": "User-agent: *\nDisallow: /private/\n",
    "german_prose-3.example": (
        "# AI crawlers are not welcome\n"
        + "".join(
            f"User-agent: {a}\n"
            for a in (
                "GPTBot",
                "ClaudeBot",
                "Google-Extended",
                "Applebot-Extended",
                "Bytespider",
                "Meta-ExternalAgent",
            )
        )
        + "Disallow: /\n\nUser-agent: *\nAllow: /\n"
    ),
    "german_prose-5.example": "User-agent: *\nAllow: /\nSitemap: https://german_prose-5.example/sitemap.xml\n",
    "web_noisy-0.example": "User-agent: CCBot\nDisallow: /forum/\n\nUser-agent: *\nDisallow: /cgi-bin/\n",
    "web_noisy-4.example": "User-agent: Applebot\nDisallow: /\n",  # not an AI agent; Applebot-Extended allowed
    "web_noisy-6.example": "<html><head><title>500 Internal Server Error</title></head></html>\n",
}


def load_de_corpus_extract() -> list[dict]:
    """The vendored de-corpus sentences: dicts `{"text", "id", "file"}` (file = source build file)."""
    path = importlib.resources.files("apertus_jax.prep").joinpath("assets", "de_corpus_extract.jsonl.xz")
    return [json.loads(line) for line in lzma.decompress(path.read_bytes()).decode("utf-8").splitlines()]


def _bucket(doc_id: str) -> int:
    return int(hashlib.sha256(doc_id.encode()).hexdigest()[:8], 16) % HOSTS_PER_SOURCE


def demo_documents() -> list[dict]:
    """Pipeline input documents `{"id", "text", "lang", "source", "url"}` in a fixed order."""
    docs = [
        {"id": d["doc_id"], "text": d["text"], "lang": d["lang"], "source": d["source"]}
        for d in load_demo_documents("train")
    ]
    web = [s for s in load_de_corpus_extract() if s["file"] in _DOC_FILES]
    for i in range(0, len(web), WEB_SENTENCES_PER_DOC):
        chunk = web[i : i + WEB_SENTENCES_PER_DOC]
        docs.append(
            {
                "id": f"de-corpus/{chunk[0]['id']}",
                "text": " ".join(s["text"] for s in chunk),
                "lang": "de",
                "source": "web_noisy",
            }
        )
    for i, doc in enumerate(docs):
        host = f"{doc['source']}-{_bucket(doc['id'])}.example"
        doc["url"] = f"https://{host}/{'forum' if doc['source'] == 'web_noisy' else 'doc'}/{i}"
    return docs


def _paragraphs(text: str, min_chars: int = 200) -> list[str]:
    return [p.strip() for p in re.split(r"\n\s*\n", text) if len(p.strip()) >= min_chars]


def demo_labels(seed: int = 0) -> dict[str, list[dict]]:
    """Labeled examples `{"text", "label"}` per head name (see the module docstring for how labels are made)."""
    rng = random.Random(seed)
    prose = load_german_prose()
    fortunes = [
        d["text"] for d in load_demo_documents("heldout", ["german_prose"]) if d["package"] == "fortunes-de"
    ]
    web = [s["text"] for s in load_de_corpus_extract() if s["file"] not in _DOC_FILES]
    handbook = [p for d in prose if d["package"] == "debian-handbook" for p in _paragraphs(d["text"])]
    reference = [p for d in prose if d["package"] == "debian-reference-de" for p in _paragraphs(d["text"])]
    chatter = fortunes + rng.sample(web, min(len(web), 800))

    toxic = [t for t in web if TOXIC_LEXICON.search(t.lower())]
    clean = [t for t in web if not TOXIC_LEXICON.search(t.lower())]
    real = fortunes + rng.sample(clean, 600) + rng.sample(handbook + reference, 400)

    def shuffled(text: str) -> str:
        words = text.split()
        rng.shuffle(words)
        return " ".join(words)

    def rows(pairs):
        return [{"text": t, "label": y} for texts, y in pairs for t in texts]

    return {
        "toxicity": rows([(toxic, 1), (rng.sample(clean, min(len(clean), 2 * len(toxic))), 0)]),
        "coherence": rows([(real, 1), ([shuffled(t) for t in rng.sample(real, len(real))], 0)]),
        "information_value": rows([(handbook + reference, 1), (chatter, 0)]),
        "educational_quality": rows([(handbook, 3.0), (reference, 2.0), (chatter, 0.0)]),
    }


def write_jsonl(rows: list[dict], path: str) -> None:
    """Writes `rows` as JSON lines (UTF-8, not ASCII-escaped) atomically (`apertus_jax.files`)."""
    files.write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
