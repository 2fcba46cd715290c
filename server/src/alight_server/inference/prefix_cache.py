"""Prompt-prefix KV reuse: an agent's calls share a system prompt and grow one conversation, so most of a
prompt's prefill was already computed for an earlier call.

Entries are per-layer (keys, values) of batch 1: whole prompts, and finished replies with their prompt
(the engine stores each row that ends: the agent's next call repeats prompt and reply before its new
turn). A new prompt reuses the longest common prefix it shares with any entry (sliced from that entry),
so prompts that diverge after a shared system prompt still share it. Causal attention makes a prefix's keys and values independent of what follows it,
so reuse changes nothing but floating-point summation order. Entries hold one weights' version: the
engine clears the cache when the weights change. Least recently used entries go first once the stored
tokens exceed the budget. Thread-safe: the engine's prefill thread looks up and stores prompts while its
decode thread stores replies.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import torch

Layers = list[tuple[torch.Tensor, torch.Tensor]]  # per layer (keys, values), each (1, H, L, D)


def _common_prefix(a: tuple[int, ...], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class PrefixCache:
    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = max_tokens
        self._entries: OrderedDict[tuple[int, ...], Layers] = OrderedDict()
        self._tokens = 0
        self._lock = threading.Lock()
        self.hit_tokens = 0  # prompt tokens whose prefill was skipped, since start
        self.miss_tokens = 0  # prompt tokens prefilled

    def lookup(self, prompt_ids: list[int]) -> tuple[int, Layers]:
        """The longest reusable prefix: (its length, its layers sliced to it); (0, []) when none.

        At most len(prompt) - 1 tokens are reused: the last prompt token must run to give the first logits.
        """
        with self._lock:
            return self._lookup(prompt_ids)

    def _lookup(self, prompt_ids: list[int]) -> tuple[int, Layers]:
        best_len, best_key = 0, None
        for key in self._entries:
            length = _common_prefix(key, prompt_ids)
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

    def store(self, token_ids: list[int], layers: Layers, replaces: list[int] | None = None) -> None:
        """Keep a token sequence's layers (callers never write into them: the decode batch concatenates copies).

        `replaces`: an entry this one extends (a prompt, now stored with its reply), dropped as redundant.
        """
        with self._lock:
            self._store(tuple(token_ids), layers, replaces)

    def _store(self, key: tuple[int, ...], layers: Layers, replaces: list[int] | None) -> None:
        if self.max_tokens <= 0 or len(key) > self.max_tokens or key in self._entries:
            return
        old = tuple(replaces) if replaces is not None else key
        if old != key and key[: len(old)] == old and self._entries.pop(old, None) is not None:
            self._tokens -= len(old)
        self._entries[key] = layers
        self._tokens += len(key)
        while self._tokens > self.max_tokens:
            old, _ = self._entries.popitem(last=False)
            self._tokens -= len(old)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._tokens = 0
