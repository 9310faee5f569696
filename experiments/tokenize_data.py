"""Tokenize raw documents into ArrayRecord shards with a manifest (the pipeline's production format).

    python -m experiments.tokenize_data --input=DIR_OR_FILE [--input=...] --kind=jsonl --tokenizer=tekken \
        --out=/data/shards/web --source=NAME --licence=ODC-By-1.0 [--score_field=score] [--shard_tokens=N]

Writes `--out` atomically (a hidden temporary directory renamed into place; nothing is left on error),
prints progress to stderr, and records in the manifest: tokenizer name/sha256/vocab, source, licence,
inputs, document and token counts, skipped empty documents and replaced invalid UTF-8 bytes.
Exit status 1 with a one-line error on bad input.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time

from apertus_jax.data import shards, sources
from apertus_jax.tokenizers import load_tokenizer
from experiments import cli


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", action="append", required=True, help="file or directory (repeatable)")
    parser.add_argument("--kind", choices=sources.RAW_KINDS, default="jsonl")
    parser.add_argument("--tokenizer", required=True, help='"tekken", "sentencepiece:PATH" or "hf:PATH"')
    parser.add_argument("--out", required=True, help="the shard set directory to create")
    parser.add_argument("--source", required=True, help="name of the data source")
    parser.add_argument("--licence", required=True, help="licence of the source text")
    parser.add_argument("--text_field", default="text")
    parser.add_argument("--id_field", default="id")
    parser.add_argument("--score_field", default=None)
    parser.add_argument("--shard_tokens", type=int, default=256 * 1024 * 1024)
    parser.add_argument("--batch_documents", type=int, default=1024, help="documents per encode batch")
    parser.add_argument("--overwrite", action="store_true")
    return parser.parse_args(argv)


def tokenize(args: argparse.Namespace) -> dict:
    """Writes the shard set and returns its manifest."""
    tokenizer = load_tokenizer(args.tokenizer)
    stats = sources.RawStats()
    documents = sources.iter_raw_documents(
        args.input,
        args.kind,
        stats,
        text_field=args.text_field,
        id_field=args.id_field,
        score_field=args.score_field,
    )
    extra = {"inputs": list(args.input), "kind": args.kind}
    start = time.perf_counter()
    with shards.ShardWriter(
        args.out,
        tokenizer,
        source=args.source,
        licence=args.licence,
        shard_tokens=args.shard_tokens,
        overwrite=args.overwrite,
        extra=extra,
    ) as writer:
        while batch := list(itertools.islice(documents, args.batch_documents)):
            for document, ids in zip(batch, tokenizer.encode_batch([d.text for d in batch])):
                writer.write([tokenizer.bod_id, *ids, tokenizer.eod_id], document.doc_id, document.score)
            manifest = writer.manifest
            print(
                f"{manifest['documents']:,} documents, {manifest['tokens']:,} tokens, "
                f"{manifest['tokens'] / (time.perf_counter() - start):,.0f} tokens/s",
                file=sys.stderr,
            )
        writer.manifest.update(
            skipped_empty_documents=stats.skipped_empty,
            replaced_invalid_utf8=stats.replaced_invalid_utf8,
            files=stats.files,
        )
    return writer.manifest


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        manifest = tokenize(args)
    except (ValueError, FileNotFoundError, FileExistsError) as error:
        print("error: " + " ".join(str(error).split()), file=sys.stderr)
        return cli.USAGE_ERROR
    print(
        f"wrote {args.out}: {manifest['documents']:,} documents, {manifest['tokens']:,} tokens in "
        f"{len(manifest['shards'])} shards; {manifest['replaced_invalid_utf8']} invalid UTF-8 bytes "
        f"replaced, {manifest['skipped_empty_documents']} empty documents skipped",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
