"""Per-token logprobs in the two OpenAI shapes: chat `logprobs.content[]` and completions' parallel lists."""

from __future__ import annotations

import functools
from typing import Any

from alight_server.inference.generation import TokenEvent


def _byte_level_alphabet() -> dict[str, int]:
    """The printable stand-ins byte-level BPE vocabularies use for the 256 byte values (char -> byte)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]  # spelled from chr(256) up, in byte order
    return {chr(b): b for b in printable} | {chr(256 + i): b for i, b in enumerate(others)}


class LogprobFormatter:
    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.byte_of = _byte_level_alphabet()
        self.special = set(getattr(tokenizer, "all_special_ids", [])) | set(
            getattr(tokenizer, "added_tokens_decoder", {})
        )
        # Token strings repeat constantly; decoding each id once keeps streaming cheap.
        self.token_text = functools.lru_cache(maxsize=65536)(lambda token_id: tokenizer.decode([token_id]))

    def _entry(self, token_id: int, logprob: float) -> dict[str, Any]:
        text = self.token_text(token_id)
        return {"token": text, "logprob": logprob, "bytes": self.token_bytes(token_id, text)}

    def token_bytes(self, token_id: int, text: str) -> list[int]:
        # A token holding part of a multi-byte character decodes to U+FFFD; its byte-level spelling
        # still says which bytes it carries, so report those (as OpenAI does) where the vocabulary allows.
        if token_id not in self.special:
            piece = self.tokenizer.convert_ids_to_tokens(token_id)
            if isinstance(piece, str) and piece and all(ch in self.byte_of for ch in piece):
                return [self.byte_of[ch] for ch in piece]
        return list(text.encode("utf-8"))

    def chat_entry(self, event: TokenEvent) -> dict[str, Any]:
        """One `ChatCompletionTokenLogprob`: the chosen token and its top alternatives."""
        entry = self._entry(event.token_id, event.logprob)
        entry["top_logprobs"] = [self._entry(t, lp) for t, lp in event.top_logprobs]
        return entry

    def completion_block(self, events: list[TokenEvent], offset: int) -> dict[str, Any]:
        """Completions `logprobs`: tokens, token_logprobs, top_logprobs (token -> logprob), text_offset."""
        tokens, offsets = [], []
        for event in events:
            offsets.append(offset)
            offset += len(event.text)
            tokens.append(self.token_text(event.token_id))
        return {
            "tokens": tokens,
            "token_logprobs": [e.logprob for e in events],
            "top_logprobs": [{self.token_text(t): lp for t, lp in e.top_logprobs} for e in events],
            "text_offset": offsets,
        }
