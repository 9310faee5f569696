"""Megatron's data: indexed datasets and the sample order of the Megatron fork's GPTDataset.

- `indexed`: `PREFIX.bin` + `PREFIX.idx` read and written, and the "megatron" component kind;
- `gpt_samples`: the GPTDataset (and BlendedDataset) sample stream over indexed datasets.
"""
