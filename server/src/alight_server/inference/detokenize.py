"""Incremental detokenization of one choice: text deltas safe to stream, and stop strings."""

from __future__ import annotations

from typing import Any


class IncrementalText:
    """Decodes the growing token list and releases only text that can no longer change.

    Held back: a trailing partial UTF-8 character (decoded as U+FFFD) and any suffix that could still
    grow into a stop string, so a streamed client never sees text the final answer would not contain.
    """

    def __init__(self, tokenizer: Any, stop: list[str]) -> None:
        self.tokenizer = tokenizer
        self.stop = stop
        self.token_ids: list[int] = []
        self.text = ""  # decoded text of all tokens so far (special tokens skipped)
        self.released = 0  # characters of `text` already handed out
        self.stopped = False

    def push(self, token_id: int) -> str:
        """Add one token; returns the newly releasable text. Sets `stopped` when a stop string appears."""
        self.token_ids.append(token_id)
        self.text = self.tokenizer.decode(self.token_ids, skip_special_tokens=True)
        if self.stop:
            # A stop string can only end in the new text, so search from just before the released part.
            window = max(0, self.released - max(len(s) for s in self.stop))
            hits = [i for i in (self.text.find(s, window) for s in self.stop) if i >= 0]
            if hits:
                self.text = self.text[: min(hits)]
                self.stopped = True
                return self.flush()
        end = len(self.text)
        if self.text.endswith("\ufffd"):
            end -= 1
        hold = 0
        for s in self.stop:
            for k in range(min(len(s) - 1, end - self.released), 0, -1):
                if self.text.endswith(s[:k], 0, end):
                    hold = max(hold, k)
                    break
        released, self.released = self.released, max(end - hold, self.released)
        return self.text[released : self.released]

    def flush(self) -> str:
        """Everything not yet released (the choice is finished)."""
        released, self.released = self.released, len(self.text)
        return self.text[released:]
