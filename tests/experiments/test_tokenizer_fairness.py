"""experiments.tokenizer_fairness as a CLI: bad input is one line naming the flag, exit 2, nothing written; a
Gini over fewer than 2 translations is blank with the reason, never 0."""

import csv

import pytest


def test_unknown_language_is_one_line_and_nothing_is_written(tmp_path, run_job):
    result = run_job("experiments.tokenizer_fairness", f"--out={tmp_path}/bad", "--languages=eng,xx")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith("error: ") and "unknown UDHR codes ['xx']" in lines[0]
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "flag, message",
    [
        (
            "--hf_tokenizer=x={tmp}/hostname",
            "--hf_tokenizer=x={tmp}/hostname: HF tokenizer {tmp}/hostname is not a tokenizer.json file "
            "(expected ident at line 1 column 2); pass the path of a tokenizer.json",
        ),
        (
            "--hf_tokenizer={tmp}/nope.json",
            "--hf_tokenizer={tmp}/nope.json: HF tokenizer file {tmp}/nope.json not found; pass the path of a "
            "tokenizer.json",
        ),
        (
            "--bpe_vocab_size=-5",
            "--bpe_vocab_size=-5: the demo BPE needs more than 260 ids (its special and byte-fallback pieces), "
            "e.g. 32000; 0 skips it",
        ),
    ],
)
def test_a_bad_tokenizer_input_is_one_line_naming_its_flag_before_tekken_s_tables(
    flag, message, tmp_path, run_job
):
    """Before: a raw traceback (a non-JSON file), SentencePiece's internal error naming no flag (-5), and --out
    left holding tekken.csv/.md in every case (the inputs were checked after tekken's tables were written)."""
    (tmp_path / "hostname").write_text("notjson\n")
    args = [f"--out={tmp_path}/out", "--languages=eng,fra", flag.format(tmp=tmp_path)]
    result = run_job("experiments.tokenizer_fairness", *args)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines() == ["error: " + message.format(tmp=tmp_path)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostname"]


def test_a_gini_over_fewer_than_two_translations_is_blank_and_summary_md_says_why(tmp_path, run_job):
    """eng and deu_1996: one translation held out whole, none of a non-Latin script. Before, the unseen-language
    Gini of one translation was printed 0.0000 (perfectly fair) while the empty non-Latin one was blank."""
    result = run_job(
        "experiments.tokenizer_fairness",
        f"--out={tmp_path}",
        "--languages=eng,deu_1996",
        "--bpe_vocab_size=0",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    (row,) = csv.DictReader(open(tmp_path / "summary.csv", encoding="utf-8"))
    assert row["gini_unseen_languages"] == row["gini_non_latin"] == ""
    assert float(row["gini_latin"]) == float(row["gini"]) > 0
    why = [line for line in (tmp_path / "summary.md").read_text().splitlines() if " is blank: " in line]
    assert why == [
        "gini_unseen_languages is blank: it covers 1 of the evaluated translations, a Gini needs 2 or more",
        "gini_non_latin is blank: it covers 0 of the evaluated translations, a Gini needs 2 or more",
    ]
    assert why[0] in result.stdout
