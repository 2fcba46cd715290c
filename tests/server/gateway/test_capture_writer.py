"""The capture writer: group commit of concurrent model calls, durable before the caller resumes."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from datetime import UTC, datetime

import pytest

from alight.schemas import ApiFlavour, ModelCall, RolloutCreate
from alight_server.gateway.capture.writer import CaptureWriter
from alight_server.store import NotFound
from alight_server.store.sql import SqlStore


def _call(rollout_id: str, attempt: int = 1) -> ModelCall:
    return ModelCall(
        id=uuid.uuid4().hex,
        rollout_id=rollout_id,
        attempt=attempt,
        seq=-1,
        flavour=ApiFlavour.CHAT,
        request={"messages": []},
        prompt_token_ids=[1],
        response_token_ids=[2],
        response_logprobs=[-0.1],
        status_code=200,
        created_at=datetime.now(UTC),
    )


class CountingStore(SqlStore):
    """A real SQLite store that counts the transactions the writer asks for."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.groups: list[int] = []

    def add_model_calls(self, calls):  # type: ignore[override]
        self.groups.append(len(calls))
        return super().add_model_calls(calls)


async def test_concurrent_calls_share_transactions_and_are_stored_when_awaited(sqlite_url: str) -> None:
    store = CountingStore(sqlite_url)
    rollouts = [r.id for r in store.create_rollouts([RolloutCreate() for _ in range(5)])]
    writer = CaptureWriter(store)
    try:
        calls = [_call(rollouts[i % 5]) for i in range(200)]
        stored = await asyncio.gather(*(writer.write(c) for c in calls))
        assert [s.id for s in stored] == [c.id for c in calls]
        for rid in rollouts:
            assert sorted(s.seq for s in stored if s.rollout_id == rid) == list(range(40))
            assert {c.id for c in store.list_model_calls(rid)} == {s.id for s in stored if s.rollout_id == rid}
        assert sum(store.groups) == 200
        assert len(store.groups) < 200  # calls queued behind a commit went in together
    finally:
        writer.close()
        store.close()


async def test_a_call_the_store_refuses_fails_alone(store: SqlStore) -> None:
    rid = store.create_rollouts([RolloutCreate()])[0].id
    writer = CaptureWriter(store)
    try:
        good = [_call(rid) for _ in range(20)]
        results = await asyncio.gather(
            *(writer.write(c) for c in good[:10]),
            writer.write(_call("no-such-rollout")),
            *(writer.write(c) for c in good[10:]),
            return_exceptions=True,
        )
        assert isinstance(results[10], NotFound)
        ok = [r for r in results if isinstance(r, ModelCall)]
        assert sorted(r.seq for r in ok) == list(range(20))
        assert len(store.list_model_calls(rid)) == 20
    finally:
        writer.close()


async def test_close_commits_what_is_queued_and_a_cancelled_caller_is_still_stored(store: SqlStore) -> None:
    rid = store.create_rollouts([RolloutCreate()])[0].id
    writer = CaptureWriter(store)
    task = asyncio.ensure_future(writer.write(_call(rid)))
    await asyncio.sleep(0)  # enqueued
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.to_thread(writer.close)
    assert len(store.list_model_calls(rid)) == 1


class ShortStore(SqlStore):
    """A store that loses track of a group once: the writer must fail those callers and keep going."""

    broken = True

    def add_model_calls(self, calls):  # type: ignore[override]
        stored = super().add_model_calls(calls)
        if self.broken:
            self.broken = False
            return stored[:-1]
        return stored


async def test_the_writer_survives_a_store_that_misbehaves(sqlite_url: str) -> None:
    store = ShortStore(sqlite_url)
    rid = store.create_rollouts([RolloutCreate()])[0].id
    writer = CaptureWriter(store)
    try:
        with pytest.raises(ValueError):
            await writer.write(_call(rid))
        assert (await writer.write(_call(rid))).seq == 1
    finally:
        writer.close()
        store.close()


async def test_a_call_alone_is_committed_on_the_event_loop_without_the_thread(store: SqlStore) -> None:
    rid = store.create_rollouts([RolloutCreate()])[0].id
    writer = CaptureWriter(store, alone=lambda: True)
    try:
        assert [(await writer.write(_call(rid))).seq for _ in range(3)] == [0, 1, 2]
        assert writer._thread is None  # no hop: nothing else could have joined these commits
        assert len(store.list_model_calls(rid)) == 3
    finally:
        writer.close()


async def test_a_call_alone_waits_on_the_thread_while_another_process_writes(sqlite_url: str) -> None:
    store = SqlStore(sqlite_url)
    rid = store.create_rollouts([RolloutCreate()])[0].id
    other = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the database's write lock
    writer = CaptureWriter(store, alone=lambda: True)
    try:
        pending = asyncio.ensure_future(writer.write(_call(rid)))
        await asyncio.sleep(0.3)
        assert not pending.done()  # not stored yet, and the event loop was free to run this test meanwhile
        other.execute("ROLLBACK")
        assert (await pending).seq == 0
        assert writer._thread is not None
    finally:
        other.close()
        writer.close()
        store.close()
