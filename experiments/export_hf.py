"""Export a training run as a HF checkpoint with its data statement.

    python -m experiments.export_hf --workdir=/tmp/apertus_demo --out=/tmp/apertus_demo_hf

Writes `config.json` + `model.safetensors` (loadable with transformers' `ApertusForCausalLM`), the run's
provenance record as `training_data.json` (sources, licences, tokens consumed per component, preparation
statistics) and a model card `README.md`. Exit status 1 with a one-line error on a bad workdir.
"""

import argparse
import sys

from apertus_jax.train.provenance import export_hf


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", required=True, help="a training workdir (experiments.pretrain output)")
    parser.add_argument("--out", required=True, help="the HF checkpoint directory to write")
    args = parser.parse_args(argv)
    try:
        record = export_hf(args.workdir, args.out)
    except (FileNotFoundError, ValueError) as error:
        print(f"export_hf: error: {error}", file=sys.stderr)
        return 1
    consumed = ", ".join(f"{name} {n:,}" for name, n in record["tokens_consumed"].items())
    print(f"wrote {args.out} (step {record['step']:,}; tokens consumed: {consumed})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
