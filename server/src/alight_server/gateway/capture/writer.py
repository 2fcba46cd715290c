"""The capture writer: one thread per gateway that commits queued model calls in groups."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from alight.schemas import ModelCall
from alight_server.store.base import Store

# One transaction holds at most this many calls; a bigger backlog takes several.
MAX_GROUP = 256


@dataclass
class _Pending:
    call: ModelCall
    future: asyncio.Future[ModelCall]
    loop: asyncio.AbstractEventLoop


_Outcome = tuple[asyncio.Future[ModelCall], ModelCall | None, BaseException | None]
_Done = tuple[_Pending, ModelCall | None, BaseException | None]


def _settle(outcomes: list[_Outcome]) -> None:
    for future, result, error in outcomes:
        if future.done():  # the caller went away (cancelled); its call is stored all the same
            continue
        if error is not None:
            future.set_exception(error)
        else:
            assert result is not None
            future.set_result(result)


class CaptureWriter:
    """Group commit: calls queued while a transaction runs are committed together in the next one.

    A call's future resolves only once its transaction committed. A call `alone` (nothing in flight could share its
    commit) commits on the event loop when the store can begin at once: docs/gateway.md "Capture" and "The lone call".
    """

    def __init__(self, store: Store, alone: Callable[[], bool] = lambda: False) -> None:
        self.store = store
        self.alone = alone
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._queued = 0  # calls handed to the thread whose callers still wait
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    async def write(self, call: ModelCall) -> ModelCall:
        """Store the call durably (it gets its seq); raises what the store raised for it."""
        if self._queued == 0 and self.alone():
            stored = self.store.add_model_calls_now([call])
            if stored is not None:
                return stored[0]
        self._ensure_started()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[ModelCall] = loop.create_future()
        self._queue.put(_Pending(call, future, loop))
        self._queued += 1
        try:
            return await future
        finally:
            self._queued -= 1

    def close(self) -> None:
        """Commit what is queued, then stop the thread."""
        thread = self._thread
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout=30)
            self._thread = None

    def _ensure_started(self) -> None:
        if self._thread is None:
            with self._start_lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="alight-capture-writer", daemon=True)
                    self._thread.start()

    def _run(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is None:
                return
            group = [first]
            while len(group) < MAX_GROUP:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                    break
                group.append(item)
            try:
                outcomes = self._commit(group)
            except Exception as exc:  # never let the thread die: its callers would wait forever
                outcomes: list[_Done] = [(pending, None, exc) for pending in group]
            self._resolve(outcomes)

    def _commit(self, group: list[_Pending]) -> list[_Done]:
        try:
            stored = self.store.add_model_calls([p.call for p in group])
        except Exception as exc:
            if len(group) == 1:
                return [(group[0], None, exc)]
            # One bad call (say its rollout vanished) must not fail the others: store them one by one.
            return self._commit_each(group)
        return [(pending, result, None) for pending, result in zip(group, stored, strict=True)]

    def _commit_each(self, group: list[_Pending]) -> list[_Done]:
        outcomes: list[_Done] = []
        for pending in group:
            try:
                outcomes.append((pending, self.store.add_model_call(pending.call), None))
            except Exception as exc:
                outcomes.append((pending, None, exc))
        return outcomes

    @staticmethod
    def _resolve(outcomes: list[_Done]) -> None:
        """Wake each waiting event loop once per group, not once per call."""
        by_loop: dict[asyncio.AbstractEventLoop, list[_Outcome]] = {}
        for pending, result, error in outcomes:
            by_loop.setdefault(pending.loop, []).append((pending.future, result, error))
        for loop, settled in by_loop.items():
            # A closed loop (RuntimeError) means nobody waits for this answer any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, settled)
