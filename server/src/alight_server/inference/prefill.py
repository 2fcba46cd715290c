"""Prefill hand-off: admitted prompts are prefilled one at a time and handed to the engine thread to join the batch.

Why a second thread, and how a weight update waits for it: docs/inference.md "How batching works".
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from alight_server.inference import batching
from alight_server.inference.generation import GenerationHandle
from alight_server.inference.prefix_cache import PrefixCache


@dataclass
class Prefilled:
    """A prompt ready to join the batch: its keys and values and the logits its first token is sampled from."""

    handle: GenerationHandle
    layers: list[tuple[torch.Tensor, torch.Tensor]]  # the prompt's keys and values, batch 1
    logits: torch.Tensor  # (V,) after the prompt's last token


@dataclass
class Prefiller:
    """Owns the prompts between admission and the batch: queued, being prefilled, prefilled.

    Its lists are guarded by the engine's condition `cond` (the engine thread waits on it for prefilled prompts, the
    prefill thread for queued ones); `stopping` reads the engine's stop flag and is called under `cond`.
    """

    model: Any
    device: torch.device
    prefix_cache: PrefixCache
    cond: threading.Condition
    stopping: Callable[[], bool]
    overlap: bool = field(kw_only=True)
    # Held while a prefill runs: the engine thread takes it to change the weights between two prefills.
    lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _queued: list[GenerationHandle] = field(default_factory=list, init=False)
    _running: GenerationHandle | None = field(default=None, init=False)
    _prefilled: list[Prefilled] = field(default_factory=list, init=False)
    thread: threading.Thread | None = field(default=None, init=False)

    def start(self) -> None:
        """Start the prefill thread (with `overlap` only); it exits once `stopping()` is true."""
        if self.overlap:
            self.thread = threading.Thread(target=self._run, name="alight-prefill", daemon=True)
            self.thread.start()

    def join(self, timeout: float) -> None:
        if self.thread is not None:
            self.thread.join(timeout=timeout)
        self.thread = None

    # -- under the engine's condition ------------------------------------------------------------
    def queue(self, handles: list[GenerationHandle]) -> None:
        """Hand admitted prompts to the prefill thread (with `overlap` only)."""
        self._queued.extend(handles)
        self.cond.notify_all()

    def admitted_choices(self) -> int:
        """Choices admitted but not yet in the batch (prefill queued, running or done)."""
        handles = [*self._queued, *([self._running] if self._running else [])]
        return sum(h.params.n for h in handles) + sum(p.handle.params.n for p in self._prefilled)

    def has_prefilled(self) -> bool:
        return bool(self._prefilled)

    def drain(self) -> set[GenerationHandle]:
        """Drop the queued and prefilled prompts, returning their requests (the running one fails itself)."""
        handles = set(self._queued) | {p.handle for p in self._prefilled}
        self._queued, self._prefilled = [], []
        return handles

    # -- from the engine thread ------------------------------------------------------------------
    def take(self) -> list[Prefilled]:
        """The prompts prefilled since the last call, in the order they finished."""
        with self.cond:
            ready, self._prefilled = self._prefilled, []
        return ready

    def prefill(self, handle: GenerationHandle) -> None:
        """Prefill one prompt and hand it over (or fail its request alone)."""
        # The result is handed over under the lock: a weight update (which takes it) then finds every
        # prefill of the old weights in `_prefilled`, and joins them to the batch under the old version.
        with self.lock:
            done = None
            if not handle.cancelled:
                try:
                    ids, row = handle.prompt_ids, handle.row
                    _, reused = self.prefix_cache.lookup(ids, scope=row)
                    layers, logits = batching.prefill(self.model, ids, self.device, reused, row)  # logits (V,)
                    self.prefix_cache.store(ids, layers, scope=row)
                    done = Prefilled(handle, layers, logits)
                except Exception as exc:  # this request alone fails; the batch is untouched
                    handle.fail(exc)
            with self.cond:
                self._running = None
                if done is not None and self.stopping():
                    handle.fail(RuntimeError("the inference engine stopped before this request finished"))
                elif done is not None:
                    self._prefilled.append(done)
                self.cond.notify_all()

    # -- the prefill thread ----------------------------------------------------------------------
    def _run(self) -> None:
        """One queued prompt at a time, handed back through `_prefilled`."""
        with torch.inference_mode():
            while True:
                with self.cond:
                    while not (self.stopping() or self._queued):
                        self.cond.wait()
                    if self.stopping():
                        return
                    handle = self._running = self._queued.pop(0)
                self.prefill(handle)
