"""The detectors: where secrets and personal data sit in a text, as (start, end, kind) spans.

What each kind finds and how (detect-secrets' plugins, the entropy principle, libphonenumber, the card ranges and
the Luhn check): docs/data.md "What is found".
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple

import phonenumbers
from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.filters.heuristic import (
    is_indirect_reference,
    is_potential_uuid,
    is_prefixed_with_dollar_sign,
    is_sequential_string,
    is_templated_secret,
)
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString, HexHighEntropyString
from detect_secrets.plugins.keyword import DENYLIST as KEYWORD_DENYLIST
from detect_secrets.plugins.keyword import KeywordDetector


class Span(NamedTuple):
    """Characters [start, end) of a text hold something of `kind` (the `[REDACTED:kind]` mark)."""

    start: int
    end: int
    kind: str


Finder = Callable[[str], Iterator[Span]]


# detect-secrets' regex plugins by kind: its secret type 'AWS Access Key' is the kind 'aws_access_key'.
PLUGINS: dict[str, type[RegexBasedDetector]] = {
    re.sub(r"[^a-z0-9]+", "_", secret_type.lower()).strip("_"): plugin
    for secret_type, plugin in get_mapping_from_secret_type_to_class().items()
    if issubclass(plugin, RegexBasedDetector)
}
HIGH_ENTROPY, KEYWORD, EMAIL, PHONE, CARD = "high_entropy", "secret_keyword", "email", "phone", "card"
KINDS: tuple[str, ...] = (*sorted(PLUGINS), KEYWORD, HIGH_ENTROPY, EMAIL, PHONE, CARD)
# A public IP address is in nearly every log line (servers, upstreams): on only when the config asks.
DEFAULT_OFF = frozenset({"public_ip_ipv4"})

PEM_END = re.compile(r"-----END[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----")
# What follows a header whose END line is missing: base64 lines, real newlines or JSON's escaped ones.
PEM_BODY = re.compile(r"(?:-----)?(?:(?:\\[nr]|[\r\n])+[A-Za-z0-9+/=]{16,})*")


def _located(text: str, values: Iterable[str], kind: str) -> Iterator[Span]:
    """A plugin reports the secret's value: mark every place the text holds it."""
    for value in set(values):
        if value:
            for m in re.finditer(re.escape(value), text):
                yield Span(m.start(), m.end(), kind)


TOKEN_TAIL = re.compile(r"(?:[A-Za-z0-9+/=_-]|\.(?=[A-Za-z0-9+/=_-]))*")


def plugin_finder(kind: str, plugin: RegexBasedDetector) -> Finder:
    """The plugin's own patterns, matched in place. A match's secret is its longest group when that group
    is key-sized (AWS's secret after its keyword), else the whole match (GitHub's group is only its prefix)."""
    patterns = list(plugin.denylist)

    def find(text: str) -> Iterator[Span]:
        for pattern in patterns:
            for m in pattern.finditer(text):
                groups = [i for i in range(1, (m.lastindex or 0) + 1) if m.group(i)]
                best = max(groups, key=lambda i: len(m.group(i)), default=0)
                which = best if best and len(m.group(best)) >= 8 else 0
                if m.end(which) > m.start(which):
                    # A pattern that stops inside a token (JWT's lazy signature) is widened to the token's end.
                    yield Span(m.start(which), TOKEN_TAIL.match(text, m.end(which)).end(), kind)  # type: ignore[union-attr]

    return find


def private_key_blocks(text: str) -> Iterator[Span]:
    """detect-secrets finds a private key by its header; the whole block, to its END line, is the secret.

    A block cut short (a log that truncated it) runs over the base64 lines that follow its header.
    """
    for header in _located(text, PLUGINS["private_key"]().analyze_string(text), "private_key"):
        begin = text.rfind("-----", max(0, header.start - 5), header.start)
        end = PEM_END.search(text, header.end, header.end + 20_000)
        stop = end.end() if end is not None else PEM_BODY.match(text, header.end).end()  # type: ignore[union-attr]
        yield Span(begin if begin >= 0 else header.start, stop, "private_key")


KEYWORDS = re.compile("|".join(KEYWORD_DENYLIST), re.IGNORECASE)  # the keyword plugin's own names
LINE = re.compile(r"[^\r\n]+")
CONSTANT_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")  # API_KEY_ENV = "ALIGHT_API_KEY" names a variable


def keyword_finder() -> Finder:
    """detect-secrets' keyword plugin (`password = "..."`), on the lines naming one of its keywords, with its
    filters for values that only refer to a secret (`${VAR}`, `$VAR`, a call) and a constant's name."""
    plugin = KeywordDetector()

    def find(text: str) -> Iterator[Span]:
        for line in LINE.finditer(text):
            if not KEYWORDS.search(line.group(0)) or is_indirect_reference(line.group(0)):
                continue
            for value in set(plugin.analyze_string(line.group(0))):
                if value and not (
                    is_templated_secret(value) or is_prefixed_with_dollar_sign(value) or CONSTANT_NAME.fullmatch(value)
                ):
                    for m in re.finditer(re.escape(value), line.group(0)):
                        yield Span(line.start() + m.start(), line.start() + m.end(), KEYWORD)

    return find


# Key characters (base64, URL-safe base64, hex), '=' only as trailing padding (so `key=value` splits).
TOKEN = re.compile(r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{20,}={0,2}(?![A-Za-z0-9+/_=\-])")
HEX = frozenset("0123456789abcdefABCDEF")
_BASE64 = Base64HighEntropyString()
_HEX = HexHighEntropyString()


def random_looking(token: str) -> bool:
    """True when `token` reads like key material rather than words, code or a path.

    Its Shannon entropy (detect-secrets' own measure, over its alphabet) must reach detect-secrets' own limit (3.0 for
    hex, 4.5 for base64), or, for a token too short to reach it, 85 % of log2 of its length: what a random string of
    that length has, and identifiers and paths, made of repeated letters, do not. Letters and digits must both appear.
    """
    core = token.strip("=-_/")
    if len(core) < 20 or not any(c.isdigit() for c in core) or not any(c.isalpha() for c in core):
        return False
    if is_potential_uuid(core) or is_sequential_string(core) or is_templated_secret(core):
        return False
    if core.count("/") > 2 or core.count("_") > 4 or core.count("-") > 4:
        return False  # a path, a snake_case or kebab-case name
    plugin = _HEX if set(core) <= HEX else _BASE64
    limit = min(plugin.entropy_limit, 0.85 * math.log2(len(core)))
    return plugin.calculate_shannon_entropy(core) >= limit


def high_entropy_tokens(text: str) -> Iterator[Span]:
    for m in TOKEN.finditer(text):
        if random_looking(m.group(0)):
            yield Span(m.start(), m.end(), HIGH_ENTROPY)


# The address part of an email: letters, digits and the usual punctuation; a domain with a dot.
EMAIL_ADDRESS = re.compile(r"(?<![\w.+-])[\w.+%-]{1,64}@(?:[A-Za-z0-9-]{1,63}\.)+[A-Za-z]{2,24}(?![\w-])")


def emails(text: str) -> Iterator[Span]:
    if "@" in text:
        for m in EMAIL_ADDRESS.finditer(text):
            yield Span(m.start(), m.end(), EMAIL)


DIGITS = re.compile(r"\d")
DOTTED_QUAD = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")


# Where a phone number could be: 7+ digits with the separators numbers are written with. libphonenumber's
# matcher then reads each such place with some text around it (it looks at what follows a number to tell a
# timestamp from a phone); scanning only there is 20x cheaper on a log full of numbers than the whole text.
PHONE_CANDIDATE = re.compile(r"[+(]?\d(?:[\d \t().\-/]{0,3}\d){6,19}")
PHONE_CONTEXT = 12
# An ISO date or a decimal number (one dot, no other separator): a log's timestamps and metrics.
NOT_A_PHONE = re.compile(r"\d{4}-\d\d-\d\d|\d+\.\d+")


def phone_finder(regions: Sequence[str]) -> Finder:
    def find(text: str) -> Iterator[Span]:
        if len(DIGITS.findall(text, 0, 100_000)) < 7:
            return
        for candidate in PHONE_CANDIDATE.finditer(text):
            if NOT_A_PHONE.fullmatch(candidate.group(0).strip()):
                continue
            start = max(0, candidate.start() - PHONE_CONTEXT)
            around = text[start : candidate.end() + PHONE_CONTEXT]
            for region in regions:
                for match in phonenumbers.PhoneNumberMatcher(around, region, leniency=phonenumbers.Leniency.VALID):
                    if not DOTTED_QUAD.fullmatch(match.raw_string):  # 93.184.216.34 is an address, not a number
                        yield Span(start + match.start, start + match.end, PHONE)

    return find


# 13 to 19 digits, in groups separated by single spaces or hyphens (as cards are printed).
CARD_CANDIDATE = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d])")
# The number ranges of the card networks (Visa 4, Mastercard 51-55 and 2221-2720, Amex 34/37, Discover
# 6011/644-649/65, Diners 36/38/300-305, JCB 3528-3589, UnionPay 62, Maestro 50/56-69).
CARD_RANGE = re.compile(r"^(?:4|5[0-6]|2[2-7]|3[4-8]|30[0-5]|6)")


def luhn_valid(digits: str) -> bool:
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def cards(text: str) -> Iterator[Span]:
    for m in CARD_CANDIDATE.finditer(text):
        digits = re.sub(r"\D", "", m.group(0))
        if 13 <= len(digits) <= 19 and CARD_RANGE.match(digits) and luhn_valid(digits):
            yield Span(m.start(), m.end(), CARD)


def pattern_finder(kind: str, regex: re.Pattern[str]) -> Finder:
    def find(text: str) -> Iterator[Span]:
        for m in regex.finditer(text):
            if m.end() > m.start():
                yield Span(m.start(), m.end(), kind)

    return find


def finders(kinds: frozenset[str], phone_regions: Sequence[str]) -> list[Finder]:
    """The finders of the kinds that run (see RedactionConfig.kinds)."""
    found: list[Finder] = []
    for kind, plugin in PLUGINS.items():
        if kind in kinds:
            found.append(private_key_blocks if kind == "private_key" else plugin_finder(kind, plugin()))
    extra: dict[str, Finder] = {
        KEYWORD: keyword_finder(),
        HIGH_ENTROPY: high_entropy_tokens,
        EMAIL: emails,
        PHONE: phone_finder(phone_regions),
        CARD: cards,
    }
    found += [finder for kind, finder in extra.items() if kind in kinds]
    return found
