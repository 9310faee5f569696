"""PII anonymization: emails, IPv4/IPv6, IBANs validated by ISO 13616 mod-97 (docs/recipe.md 7)."""

import string

from hypothesis import given, settings
from hypothesis import strategies as st

from apertus_jax.prep.filters.pii import anonymize_pii, iban_is_valid

# Published example IBANs (valid check digits).
VALID_IBANS = [
    "DE89 3704 0044 0532 0130 00",
    "CH93 0076 2011 6238 5295 7",
    "GB82 WEST 1234 5698 7654 32",
    "FR14 2004 1010 0505 0001 3M02 606",
    "AT61 1904 3002 3457 3201",
]


def _one_digit_changed(iban: str) -> str:
    i = max(i for i, ch in enumerate(iban) if ch.isdigit())  # the last BBAN digit
    return iban[:i] + str((int(iban[i]) + 1) % 10) + iban[i + 1 :]


def test_valid_ibans_with_and_without_spaces_are_replaced():
    for iban in VALID_IBANS:
        for written in (iban, iban.replace(" ", "")):
            text, counts = anonymize_pii(f"Bitte überweisen Sie den Betrag auf {written} bis Freitag.")
            assert text == "Bitte überweisen Sie den Betrag auf <iban-pii> bis Freitag.", written
            assert counts == {"email": 0, "ip": 0, "iban": 1}


def test_iban_with_one_digit_changed_is_kept():
    for iban in VALID_IBANS:
        wrong = _one_digit_changed(iban)
        assert not iban_is_valid(wrong)
        text = f"Konto {wrong} und Konto {wrong.replace(' ', '')}."
        assert anonymize_pii(text) == (text, {"email": 0, "ip": 0, "iban": 0})


def test_only_the_published_check_digits_pass():
    """Mod 97 must equal 1: of the 100 check-digit pairs of a BBAN exactly one passes (remainder 0 fails)."""
    for iban in VALID_IBANS:
        compact = iban.replace(" ", "")
        passing = [f"{cd:02d}" for cd in range(100) if iban_is_valid(f"{compact[:2]}{cd:02d}{compact[4:]}")]
        assert passing == [compact[2:4]], iban


def test_iban_followed_by_code_word_is_cut_at_country_length():
    assert (
        anonymize_pii("IBAN: DE89 3704 0044 0532 0130 00 BLZ 37040044")[0] == "IBAN: <iban-pii> BLZ 37040044"
    )


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=string.digits, min_size=18, max_size=22))
def test_random_digit_runs_after_a_country_code_are_replaced_only_if_valid(digits):
    text = f"Nummer DE{digits} Ende"
    replaced = anonymize_pii(text)[1]["iban"] == 1
    assert replaced == iban_is_valid(f"DE{digits}")


def test_ipv4_and_ipv6_forms():
    text = (
        "Server 192.168.0.17, Loopback ::1, Doku 2001:db8::8a2e:370:7334, voll "
        "2001:0db8:0000:0000:0000:ff00:0042:8329, gemischt ::ffff:192.0.2.128 und 64:ff9b::10.0.0.1."
    )
    out, counts = anonymize_pii(text)
    assert out == (
        "Server <ip-pii>, Loopback <ip-pii>, Doku <ip-pii>, voll <ip-pii>, gemischt <ip-pii> und <ip-pii>."
    )
    assert counts["ip"] == 6


def test_non_addresses_are_kept():
    text = "Um 12:30:45 Uhr kam Version 1.2.3.4.5 heraus; 999.1.1.1 ist keine Adresse, a:b:c auch nicht."
    assert anonymize_pii(text) == (text, {"email": 0, "ip": 0, "iban": 0})


def test_email_amid_umlauts_keeps_adjacent_words():
    cases = {
        "Schreiben Sie an jürgen.müller@beispiel-büro.de für Rückfragen.": "Schreiben Sie an <email-pii> für Rückfragen.",
        "Grüße,anna.schäfer@firma.at;Österreich": "Grüße,<email-pii>;Österreich",
        "Kontakt: (info@straße.de) übermorgen": "Kontakt: (<email-pii>) übermorgen",
        "Mail an max@example.org. Danach Frühstück.": "Mail an <email-pii>. Danach Frühstück.",
    }
    for text, expected in cases.items():
        out, counts = anonymize_pii(text)
        assert out == expected
        assert counts["email"] == 1


def test_text_without_pii_is_unchanged():
    text = (
        "Die Würde des Menschen ist unantastbar. Sie zu achten und zu schützen ist Verpflichtung aller "
        "staatlichen Gewalt."
    )
    assert anonymize_pii(text) == (text, {"email": 0, "ip": 0, "iban": 0})
