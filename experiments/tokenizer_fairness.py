r"""Tokenizer fairness report on the UDHR parallel corpus (Apertus Figure 1 on UDHR instead of FLORES+).

Evaluates tekken (the Apertus tokenizer), a SentencePiece BPE trained here on the demo corpus, and any
HF tokenizer.json given, on the 521 UDHR translations vendored with the demo corpus, and writes to --out:
  <tokenizer>.csv / <tokenizer>.md   per-language table (tokens, parity vs English, fertility, ...)
  summary.csv / summary.md           one row per tokenizer (Gini, fertility, compression, utilization)
  by_script.csv / by_script.md       median cost per dominant script, one column per tokenizer
  tokenizer_fairness.png             per-language cost sorted, one line per tokenizer, Gini in the legend
  report.json                        the counts, the Gini of the texts' lengths and each tokenizer's seconds

The demo BPE is trained on the demo corpus's train split, which holds about 95% of the UDHR text of 95% of
the translations (plus German prose): on those it is contaminated (it has seen the evaluation text), so its
costs are optimistic. The column `gini_unseen_languages` is computed over the 5% of translations held out
whole, languages the demo BPE has not seen. `gini` covers all translations (several for some languages, e.g. 7
for Mandarin), `gini_one_per_language` the first translation of each identified ISO 639-3 language,
`gini_latin` / `gini_non_latin` the translations whose dominant script is / is not Latin. The report is
`apertus_jax.tokenizers.report.write_fairness_report`; a subset of fewer than 2 evaluated translations has
a blank Gini (summary.md says why). An unknown UDHR code, a missing or unreadable --hf_tokenizer file, a
--bpe_vocab_size below 261 or an --out that cannot be a folder ends with one line on stderr naming the flag and exit status 2, nothing written.

  python -m experiments.tokenizer_fairness --out=/tmp/fairness \
      --hf_tokenizer=llama3.1=/tmp/llama/package/models/tokenizer.json
"""

import os

from absl import flags, logging

from apertus_jax.data.demo_corpus import load_demo_documents, load_udhr, udhr_languages
from apertus_jax.tokenizers.report import write_fairness_report
from apertus_jax.train.checkpoint import check_workdir_usable
from experiments import cli

OUT = flags.DEFINE_string("out", None, "output folder", required=True)
HF_TOKENIZERS = flags.DEFINE_multi_string(
    "hf_tokenizer", [], "HF tokenizer.json to compare, as PATH or NAME=PATH (repeatable)"
)
BPE_VOCAB_SIZE = flags.DEFINE_integer(
    "bpe_vocab_size",
    32_000,
    "vocabulary of the SentencePiece BPE trained on the demo corpus (Boldt's 32k); 0 skips it",
)
REFERENCE = flags.DEFINE_string("reference_lang", "eng", "UDHR code whose cost is parity 1.0")
LANGUAGES = flags.DEFINE_list("languages", None, "UDHR codes to evaluate (default: all)")


def main(argv):
    del argv
    check_workdir_usable(OUT.value, "--out")
    write_fairness_report(
        OUT.value,
        load_udhr(),
        udhr_languages(),
        load_demo_documents,
        languages=LANGUAGES.value,
        reference=REFERENCE.value,
        bpe_vocab_size=BPE_VOCAB_SIZE.value,
        hf_tokenizers=HF_TOKENIZERS.value,
        log=logging.info,
    )
    with open(os.path.join(OUT.value, "summary.md"), encoding="utf-8") as f:
        print(f.read(), end="")
    print(f"wrote {OUT.value}: summary.md, by_script.md, tokenizer_fairness.png and a table per tokenizer")


if __name__ == "__main__":
    cli.execute(main)
