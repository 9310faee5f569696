"""Post-training on the pretraining trainer: chat-format SFT, length-normalized QRPO and the DPO baseline.

Modules: `chat` (the chat template and its role tokens), `records` (JSONL conversations and preference
records, validated with line numbers), `rows` (sequences packed into trainer rows), `sft_data` and
`preference_data` (the batch iterators), `objectives` (quantile reward, QRPO and DPO losses), `reference`
(the frozen reference model's log-probabilities, cached or on the fly), `config` (the `posttrain` section),
`tiny_sets` (the tiny SFT and QRPO sets of `assets/`).
See docs/posttrain.md.
"""
