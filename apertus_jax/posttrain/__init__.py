"""Post-training on the pretraining trainer: the objectives and batch sources beyond pretraining's.

Chat SFT, length-normalized QRPO, the DPO baseline and distillation from stored teacher logits
(docs/posttrain.md).

- `chat`: the chat template and its role tokens;
- `inputs`: JSONL conversations and preference records, validated with line numbers;
- `rows`: whole sequences packed into trainer rows;
- `epochs`: the resumable cursor over epoch-shuffled examples;
- `sft_data`, `preference_data`: the SFT and QRPO/DPO batch iterators;
- `objectives`: quantile reward, QRPO and DPO losses;
- `reference`: the frozen reference model's log-probabilities, cached or on the fly;
- `rewards`: the word-level ROUGE-L reward of the tiny QRPO set;
- `distillation`: the teacher-logit store, its batch source and the distillation objective;
- `config`: the `posttrain` section;
- `tiny_sets`: the tiny SFT and QRPO sets of `assets/`;
- `assets`: the tiny sets' sources (data, not code).
"""
