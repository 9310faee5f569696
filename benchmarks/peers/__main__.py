"""CLI: `python -m benchmarks.peers maxtext|transformers|all`; one `PEER tokens_per_s=N ...` line per peer."""

import argparse
import sys

from benchmarks.peers import run


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Peer train-step throughput on bench-18m")
    parser.add_argument("peer", choices=(*run.PEERS, "all"))
    parser.add_argument("--cache", default=run.default_cache(), help="where the peers' venvs live")
    parser.add_argument("--steps", type=int, default=15, help="timed steps")
    parser.add_argument("--maxtext_warmup", type=int, default=5, help="untimed MaxText steps (compile)")
    parser.add_argument("--transformers_warmup", type=int, default=2, help="untimed transformers steps")
    parser.add_argument(
        "--vocab", type=int, default=run.BENCH_18M["vocab"], help="transformers only: the vocabulary size"
    )
    parser.add_argument("--maxtext_python", default="", help="Python >= 3.12 for MaxText (default: found)")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.maxtext_warmup < 1 or args.transformers_warmup < 1:
        print("error: --steps, --maxtext_warmup and --transformers_warmup must be >= 1", file=sys.stderr)
        sys.exit(2)
    if args.vocab < 1:
        print(f"error: --vocab={args.vocab} must be >= 1", file=sys.stderr)
        sys.exit(2)
    if args.vocab != run.BENCH_18M["vocab"] and args.peer != "transformers":
        print(f"error: --vocab is for the transformers peer only, not {args.peer!r}", file=sys.stderr)
        sys.exit(2)
    peers = run.PEERS if args.peer == "all" else (args.peer,)
    try:
        for peer in peers:
            if peer == "maxtext":
                line = run.run_maxtext(args.cache, args.steps, args.maxtext_warmup, args.maxtext_python)
            else:
                line = run.run_transformers(args.cache, args.steps, args.transformers_warmup, args.vocab)
            print(line, flush=True)
    except RuntimeError as err:
        sys.exit(f"error: {err}")


if __name__ == "__main__":
    main()
