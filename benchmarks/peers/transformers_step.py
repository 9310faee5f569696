"""Train-step throughput of HF transformers `ApertusForCausalLM` (torch, AdamW) on the given shapes.

    python transformers_step.py --vocab 32000 --d_model 256 --layers 2 --heads 4 --kv_heads 4 --mlp 1536
        --batch 4 --seq 256 [--steps 15 --warmup 2 --threads N]

Runs inside the peer's own environment (torch and transformers only; nothing of this repository is imported,
hence argparse rather than absl and `experiments.cli`).
One step is forward + cross-entropy loss + backward + `torch.optim.AdamW.step` + `zero_grad`, float32, on a
fixed batch; token ids are random because the step's cost does not depend on their values. Prints
`transformers tokens_per_s=N (median of K steps)`: batch x seq over the median wall time of the `--steps`
timed steps after `--warmup` untimed ones.
"""

import argparse
import os
import statistics
import sys
import time


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("vocab", "d_model", "layers", "heads", "kv_heads", "mlp", "batch", "seq"):
        parser.add_argument(f"--{name}", type=int, required=True)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args(argv)
    if args.steps < 1 or args.warmup < 1:
        print(f"error: --steps={args.steps} and --warmup={args.warmup} must both be >= 1", file=sys.stderr)
        sys.exit(2)

    import torch
    from transformers import ApertusConfig, ApertusForCausalLM

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    config = ApertusConfig(
        vocab_size=args.vocab,
        hidden_size=args.d_model,
        intermediate_size=args.mlp,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        max_position_embeddings=max(4096, args.seq),
    )
    model = ApertusForCausalLM(config).float()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    input_ids = torch.randint(0, args.vocab, (args.batch, args.seq))
    times = []
    for i in range(args.warmup + args.steps):
        start = time.perf_counter()
        loss = model(input_ids=input_ids, labels=input_ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if i >= args.warmup:
            times.append(time.perf_counter() - start)
    tokens_per_s = args.batch * args.seq / statistics.median(times)
    print(f"transformers tokens_per_s={tokens_per_s:.0f} (median of {len(times)} steps)")


if __name__ == "__main__":
    main()
