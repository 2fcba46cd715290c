"""The Redactor: a text with every detected span replaced by `[REDACTED:kind]`; every string of a JSON value."""

from __future__ import annotations

import functools
import re
from typing import Any

from alight_server.redaction.config import RedactionConfig
from alight_server.redaction.detectors import (
    CARD,
    EMAIL,
    HIGH_ENTROPY,
    KEYWORD,
    PHONE,
    Span,
    finders,
    pattern_finder,
    private_key_blocks,
)

MARK = "[REDACTED:{kind}]"
# Detectors run over windows of a long text (a log): a pattern that backtracks on hostile input then
# costs at most WINDOW squared per window, linear in all. Windows overlap by more than any key is long,
# so every key lies whole in one of them; a PEM block, longer, is found on the whole text.
WINDOW, OVERLAP = 8192, 2048
# A finding cut by a window's edge (a JWT longer than the overlap) is widened to the run of token
# characters around it, so the rest of it is hidden too; a widening reaches at most one window further,
# so a hostile text of one long run still costs linear time.
_RUN_AFTER = re.compile(r"[^\s\"'<>,;()\[\]{}]*")
_NOT_IN_RUN = re.compile(r"[\s\"'<>,;()\[\]{}]")
# A trajectory repeats its conversation in every call: each message is scanned once. The cache holds
# up to CACHED_TEXTS texts of at most SMALL_TEXT characters (32 MB at worst) and the last LARGE_TEXTS
# longer ones (a tool result every request repeats, a log), so a server's memory stays bounded.
CACHED_TEXTS, SMALL_TEXT, LARGE_TEXTS = 1024, 32_768, 8


def mark(kind: str) -> str:
    return MARK.format(kind=kind)


# Which name a merged span keeps: a provider's key over an operator pattern over personal data over
# the generic high-entropy finding (a GitHub token in a URL's credentials reads as an email too).
RANK = {KEYWORD: 1, EMAIL: 2, PHONE: 2, CARD: 2, HIGH_ENTROPY: 3}


def merge(spans: list[Span]) -> list[Span]:
    """Overlapping or touching spans become one, named by the most specific kind among them (RANK)."""
    merged: list[Span] = []
    for span in sorted(spans):
        if merged and span.start <= merged[-1].end:
            last = merged[-1]
            kind = min(last.kind, span.kind, key=lambda k: RANK.get(k, 0))
            merged[-1] = Span(last.start, max(last.end, span.end), kind)
        else:
            merged.append(span)
    return merged


def _whole_run(text: str, span: Span, at: int, size: int) -> Span:
    """`span` (found in the window of `size` characters at `at`) in `text`, widened where a window edge cut it."""
    start, end = span.start + at, span.end + at
    if span.end == size and end < len(text):
        after = _RUN_AFTER.match(text, end, end + WINDOW)
        end = after.end() if after else end
    if span.start == 0 and at > 0:
        lo = max(0, start - WINDOW)
        stop = _NOT_IN_RUN.search(text[lo:start][::-1])  # the nearest character before that ends the run
        start = start - stop.start() if stop else lo
    return Span(start, end, span.kind)


class Redactor:
    """Detectors built once from the `redaction:` config; safe to share between threads.

    >>> Redactor().redact_text("mail bob@example.com")
    ('mail [REDACTED:email]', [Span(start=5, end=20, kind='email')])
    """

    def __init__(self, config: RedactionConfig | None = None, cached_texts: int = CACHED_TEXTS) -> None:
        config = config or RedactionConfig()
        found = finders(config.kinds(), config.phone_regions)
        self._whole = [f for f in found if f is private_key_blocks]  # a PEM block outgrows a window
        self._finders = [f for f in found if f is not private_key_blocks]
        self._finders += [pattern_finder(p.name, re.compile(p.regex)) for p in config.patterns]
        self._small = functools.lru_cache(maxsize=cached_texts)(self._find)
        self._large = functools.lru_cache(maxsize=LARGE_TEXTS if cached_texts else 0)(self._find)

    def _find(self, text: str, identifier: bool) -> tuple[Span, ...]:
        found = [span for find in self._whole for span in find(text)]
        for at in range(0, max(len(text) - OVERLAP, 1), WINDOW - OVERLAP):
            window = text[at : at + WINDOW]
            found += [_whole_run(text, s, at, len(window)) for find in self._finders for s in find(window)]
        if identifier:  # an id looks random by design: only a known key format counts there
            found = [span for span in found if span.kind != HIGH_ENTROPY]
        return tuple(merge(found))

    def spans(self, text: str, *, identifier: bool = False) -> list[Span]:
        """Where `text` holds something to hide, sorted, never overlapping.

        `identifier`: the text is an id field's value (`id`, `tool_call_id`, ...), where random-looking
        is expected; a provider's key format, an email or the like is still found there.
        """
        if not text:
            return []
        return list((self._small if len(text) <= SMALL_TEXT else self._large)(text, identifier))

    def redact_text(self, text: str, *, identifier: bool = False) -> tuple[str, list[Span]]:
        """`text` with each span replaced by its mark, and the spans (positions in the original text)."""
        spans = self.spans(text, identifier=identifier)
        if not spans:
            return text, []
        kept_from = [0, *(span.end for span in spans)]  # where each stretch of text kept as it is starts
        hidden = "".join(text[at : span.start] + mark(span.kind) for at, span in zip(kept_from, spans, strict=False))
        return hidden + text[kept_from[-1] :], spans

    def redact(self, text: str, *, identifier: bool = False) -> str:
        return self.redact_text(text, identifier=identifier)[0]

    def redact_json(self, value: Any, *, identifier: bool = False) -> Any:
        """A copy of a JSON value with every string redacted (object keys too); numbers and the shape kept.

        A string under a key `id` or `*_id` is read as an identifier (see `spans`).
        """
        if isinstance(value, str):
            return self.redact(value, identifier=identifier)
        if isinstance(value, dict):
            return {
                self.redact(str(k)): self.redact_json(v, identifier=is_id_key(str(k)))  # pyright: ignore[reportUnknownArgumentType]
                for k, v in value.items()  # pyright: ignore[reportUnknownVariableType]
            }
        if isinstance(value, list | tuple):
            return [self.redact_json(v, identifier=identifier) for v in value]  # pyright: ignore[reportUnknownVariableType]
        return value


def is_id_key(key: str) -> bool:
    return key == "id" or key.endswith("_id")


@functools.lru_cache(maxsize=1)
def default_redactor() -> Redactor:
    """The redactor of a default `redaction:` section, for the places without a server config."""
    return Redactor()


def redact_for_people(text: str) -> str:
    """`text` redacted with the default detectors: what `alight logs` applies to logs read from local disk."""
    return default_redactor().redact(text)
