"""Regex PII anonymization: email addresses, IP addresses (v4 and v6) and IBANs (Apertus 3.1.2, docs/recipe.md 7).

Matches are replaced by the markers `<email-pii>`, `<ip-pii>` and `<iban-pii>`. Candidates are validated
before replacement so that ordinary text survives: IPv6 candidates must parse with `ipaddress`, IBANs
must have their country's registered length and pass the ISO 13616 / ISO 7064 mod-97 check, so a
mistyped or random digit run is kept. Like the paper, this is best effort (no NER, no context).
"""

import ipaddress
import re

EMAIL_MARKER = "<email-pii>"
IP_MARKER = "<ip-pii>"
IBAN_MARKER = "<iban-pii>"

# Unicode-aware so that umlauts belong to the address they are in (`jürgen.müller@...`) and an address
# stops at the first character that cannot be part of it, never eating the neighbouring German words.
_EMAIL = re.compile(r"(?<![\w.%+-])[\w.%+-]+@(?:[^\W_](?:[\w-]*[^\W_])?\.)+[^\W\d_]{2,}(?![\w-])")
_IPV4_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4 = re.compile(rf"(?<![\w.]){_IPV4_OCTET}(?:\.{_IPV4_OCTET}){{3}}(?!\.?\d)(?!\w)")
# Candidate only; `ipaddress` decides (compressed `::`, embedded IPv4 tails such as `::ffff:192.0.2.1`).
_IPV6_CANDIDATE = re.compile(r"(?<![\w:.])[0-9A-Fa-f:]*:[0-9A-Fa-f:]*:[0-9A-Fa-f:.]*(?![\w:])")
# Country code, check digits, then the BBAN with optional single spaces (printed IBANs use groups of 4).
_IBAN_CANDIDATE = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){10,30}(?![a-z0-9])")

# ISO 13616 registry: total IBAN length per country (SWIFT IBAN registry).
IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BI": 27,
    "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27, "DK": 18, "DO": 28,
    "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
    "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27,
    "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25,
    "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18,
    "NO": 15, "OM": 23, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33,
    "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}  # fmt: skip


def iban_is_valid(iban: str) -> bool:
    """ISO 13616 check of an IBAN written with or without spaces.

    Valid iff the country is in the registry, the length matches it, and the number formed by moving the
    first four characters to the end (letters A..Z -> 10..35) is 1 modulo 97 (ISO 7064 MOD 97-10).
    """
    compact = iban.replace(" ", "")
    if (
        not compact.isascii()
        or not compact.isalnum()
        or not compact[:2].isalpha()
        or not compact[2:4].isdigit()
    ):
        return False
    if IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1


def _replace_ibans(text: str) -> tuple[str, int]:
    pieces, count, last = [], 0, 0
    for match in _IBAN_CANDIDATE.finditer(text):
        candidate = match.group()
        length = IBAN_LENGTHS.get(candidate[:2])
        if length is None:
            continue
        # The candidate may run into a following code word ("... 3000 BLZ"): cut at the country's length.
        end, seen = 0, 0
        while end < len(candidate) and seen < length:
            seen += candidate[end] != " "
            end += 1
        tail = candidate[end:]
        if seen != length or (tail and tail[0] != " ") or not iban_is_valid(candidate[:end]):
            continue
        pieces += [text[last : match.start()], IBAN_MARKER]
        last = match.start() + end
        count += 1
    pieces.append(text[last:])
    return "".join(pieces), count


def _replace_ipv6(text: str) -> tuple[str, int]:
    count = 0

    def replace(match: re.Match) -> str:
        nonlocal count
        address = match.group().rstrip(".")  # a sentence may end right after an embedded IPv4 tail
        try:
            ipaddress.IPv6Address(address)
        except ValueError:
            return match.group()
        count += 1
        return IP_MARKER + match.group()[len(address) :]

    return _IPV6_CANDIDATE.sub(replace, text), count


def anonymize_pii(text: str) -> tuple[str, dict[str, int]]:
    """Replace emails, IPv4/IPv6 addresses and valid IBANs in `text` by markers.

    Args:
      text: a document (any language).
    Returns:
      (anonymized text, counts) with counts `{"email": n, "ip": n, "iban": n}` (replacements made).
    Source: Apertus 3.1.2; docs/recipe.md section 7. Code and math sources are skipped by the pipeline step, not here.
    """
    counts = {}
    text, counts["email"] = _EMAIL.subn(EMAIL_MARKER, text)
    text, n_ipv6 = _replace_ipv6(text)  # before IPv4, so that mixed forms are replaced whole
    text, n_ipv4 = _IPV4.subn(IP_MARKER, text)
    counts["ip"] = n_ipv6 + n_ipv4
    text, counts["iban"] = _replace_ibans(text)
    return text, counts
