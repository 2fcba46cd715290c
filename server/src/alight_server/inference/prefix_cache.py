"""Prompt-prefix KV reuse: the longest prefix a prompt shares with a stored prompt or reply is not prefilled again.

What is kept, why reuse changes no output and when the cache empties: docs/inference.md "Prefix reuse". Entries
are keyed by adapter too (`scope`: an adapter's update clears only its own). Thread-safe: the engine's prefill
thread looks up and stores prompts while its decode thread stores replies.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import torch

Layers = list[tuple[torch.Tensor, torch.Tensor]]  # per layer (keys, values), each (1, H, L, D)


def _common_prefix(a: tuple[int, ...], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


class PrefixCache:
    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = max_tokens
        self._entries: OrderedDict[tuple[str | None, tuple[int, ...]], Layers] = OrderedDict()  # (scope, tokens)
        self._tokens = 0
        self._lock = threading.Lock()
        self.hit_tokens = 0  # prompt tokens whose prefill was skipped, since start
        self.miss_tokens = 0  # prompt tokens prefilled

    def lookup(self, prompt_ids: list[int], scope: str | None = None) -> tuple[int, Layers]:
        """The longest reusable prefix among `scope`'s entries: (its length, its layers sliced to it); (0, []) when none.

        At most len(prompt) - 1 tokens are reused: the last prompt token must run to give the first logits.
        """
        with self._lock:
            best_len, best_key = 0, None
            for key in self._entries:
                length = _common_prefix(key[1], prompt_ids) if key[0] == scope else 0
                if length > best_len:
                    best_len, best_key = length, key
            best_len = min(best_len, len(prompt_ids) - 1)
            if best_key is None or best_len <= 0:
                self.miss_tokens += len(prompt_ids)
                return 0, []
            self._entries.move_to_end(best_key)
            self.hit_tokens += best_len
            self.miss_tokens += len(prompt_ids) - best_len
            layers = self._entries[best_key]
            return best_len, [(k[:, :, :best_len], v[:, :, :best_len]) for k, v in layers]

    def store(
        self, token_ids: list[int], layers: Layers, replaces: list[int] | None = None, scope: str | None = None
    ) -> None:
        """Keep a token sequence's layers (callers never write into them: the decode batch concatenates copies).

        `replaces`: an entry this one extends (a prompt, now stored with its reply), dropped as redundant.
        """
        tokens = tuple(token_ids)
        key = (scope, tokens)
        old = tuple(replaces) if replaces is not None else tokens
        with self._lock:
            if self.max_tokens <= 0 or len(tokens) > self.max_tokens or key in self._entries:
                return
            if old != tokens and tokens[: len(old)] == old and self._entries.pop((scope, old), None) is not None:
                self._tokens -= len(old)
            self._entries[key] = layers
            self._tokens += len(tokens)
            while self._tokens > self.max_tokens:
                (_, dropped), _ = self._entries.popitem(last=False)
                self._tokens -= len(dropped)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._tokens = 0

    def clear_scope(self, scope: str | None) -> None:
        """Drop `scope`'s entries only (one adapter changed; the others' keys and values still hold)."""
        with self._lock:
            for key in [k for k in self._entries if k[0] == scope]:
                del self._entries[key]
                self._tokens -= len(key[1])
