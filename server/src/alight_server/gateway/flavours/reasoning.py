"""A policy's reasoning, told apart from its answer, for the APIs that carry it separately (thinking, reasoning).

Two ways a chat upstream returns reasoning: a `reasoning_content` (or `reasoning`) field, when the
server runs a reasoning parser (vLLM's `--reasoning-parser`), or `<think>...</think>` at the start of
the content, when it does not. Either way only the presentation changes: the recorded response and
its token ids stay exactly what the upstream produced.
"""

from __future__ import annotations

from typing import Any, Literal

OPEN, CLOSE = "<think>", "</think>"
FIELDS = ("reasoning_content", "reasoning")
Piece = tuple[Literal["reasoning", "text"], str]


def field_reasoning(message_or_delta: dict[str, Any]) -> str:
    for key in FIELDS:
        value = message_or_delta.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def split_message(message: dict[str, Any]) -> tuple[str, str]:
    """(reasoning, answer text) of a whole chat message."""
    splitter = ThinkSplitter()
    pieces = splitter.feed(message) + splitter.flush()
    reasoning = "".join(text for kind, text in pieces if kind == "reasoning")
    return reasoning, "".join(text for kind, text in pieces if kind == "text")


class ThinkSplitter:
    """Streamed chat deltas in, ordered (kind, text) pieces out; a tag cut across chunks is held back."""

    def __init__(self) -> None:
        self.state: Literal["start", "thinking", "answer"] = "start"
        self.held = ""
        self.after_close = False  # the newline a template puts after </think> is layout, not answer

    def feed(self, delta: dict[str, Any]) -> list[Piece]:
        out: list[Piece] = []
        if reasoning := field_reasoning(delta):
            out.append(("reasoning", reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            out += self._content(self.held + content)
        return out

    def flush(self) -> list[Piece]:
        """What is still held at the end: a cut-off tag is text after all (or reasoning, inside one)."""
        held, self.held = self.held, ""
        if not held:
            return []
        return [("reasoning" if self.state == "thinking" else "text", held)]

    def _content(self, text: str) -> list[Piece]:
        self.held = ""
        if self.state == "start":
            stripped = text.lstrip()
            if stripped.startswith(OPEN):
                self.state = "thinking"
                text = stripped[len(OPEN) :]
            elif OPEN.startswith(stripped):  # maybe the start of the tag: wait for more
                self.held = text
                return []
            else:
                self.state = "answer"
        if self.state == "answer":
            if self.after_close:
                text = text.lstrip("\n")
                self.after_close = not text
            return [("text", text)] if text else []
        end = text.find(CLOSE)
        if end >= 0:
            self.state, self.after_close = "answer", True
            pieces: list[Piece] = [("reasoning", text[:end])] if end else []
            return pieces + self._content(text[end + len(CLOSE) :])
        keep = _partial_suffix(text, CLOSE)
        self.held = text[len(text) - keep :] if keep else ""
        body = text[: len(text) - keep]
        return [("reasoning", body)] if body else []


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of `tag`."""
    return next((n for n in range(min(len(tag) - 1, len(text)), 0, -1) if tag.startswith(text[-n:])), 0)
