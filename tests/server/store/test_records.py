"""Store contract: events, rewards, model calls, spans, upstreams, schema versions, reopening."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import sqlalchemy as sa
from store_testkit import model_call

from alight.schemas import (
    AttemptFinish,
    EventCreate,
    RewardCreate,
    RewardSource,
    RolloutCreate,
    SpanRecord,
    UpstreamCreate,
)
from alight_server.store import Conflict, NotFound, SchemaTooNew, StoreError
from alight_server.store.base import AttemptEnded
from alight_server.store.keys.kek import KekSource
from alight_server.store.sql import SqlStore
from alight_server.store.tables import SCHEMA_VERSION


@pytest.fixture
def rollout_id(any_store: SqlStore) -> str:
    return any_store.create_rollouts([RolloutCreate(id="r")])[0].id


def test_events_are_idempotent_on_their_id_and_filterable(any_store: SqlStore, rollout_id: str) -> None:
    e1 = any_store.add_event(rollout_id, EventCreate(id="e1", kind="log", attempt=1, payload={"x": 1}))
    assert any_store.add_event(rollout_id, EventCreate(id="e1", kind="log", attempt=1, payload={"x": 1})) == e1
    any_store.add_event(rollout_id, EventCreate(kind="progress", attempt=2))
    assert [e.kind for e in any_store.list_events(rollout_id)] == ["log", "progress"]
    assert [e.kind for e in any_store.list_events(rollout_id, attempt=2)] == ["progress"]
    assert [e.id for e in any_store.list_events(rollout_id, kind="log")] == ["e1"]


def test_an_event_id_reused_with_another_body_is_a_conflict(any_store: SqlStore, rollout_id: str) -> None:
    any_store.add_event(rollout_id, EventCreate(id="e1", kind="log"))
    with pytest.raises(Conflict, match="e1"):
        any_store.add_event(rollout_id, EventCreate(id="e1", kind="other"))


def test_events_and_rewards_need_a_known_rollout(any_store: SqlStore) -> None:
    with pytest.raises(NotFound):
        any_store.add_event("ghost", EventCreate(kind="log"))
    with pytest.raises(NotFound):
        any_store.add_reward("ghost", RewardCreate(attempt=1, value=1.0))
    with pytest.raises(NotFound):
        any_store.list_events("ghost")


def test_rewards_round_trip_and_are_idempotent(any_store: SqlStore, rollout_id: str) -> None:
    item = RewardCreate(id="w1", attempt=1, value=0.75, name="acc", final=True, source=RewardSource.EVALUATOR)
    stored = any_store.add_reward(rollout_id, item)
    assert (stored.value, stored.name, stored.final, stored.source) == (0.75, "acc", True, RewardSource.EVALUATOR)
    assert any_store.add_reward(rollout_id, item) == stored
    any_store.add_reward(rollout_id, RewardCreate(attempt=2, value=-1))
    assert [w.value for w in any_store.list_rewards(rollout_id)] == [0.75, -1.0]
    assert [w.attempt for w in any_store.list_rewards(rollout_id, attempt=2)] == [2]
    with pytest.raises(Conflict):
        any_store.add_reward(rollout_id, item.model_copy(update={"value": 0.5}))


def test_an_agent_write_needs_its_attempt_running_in_the_same_transaction(any_store: SqlStore) -> None:
    any_store.create_rollouts([RolloutCreate(id="r")])
    with pytest.raises(AttemptEnded, match="never started"):
        any_store.add_reward("r", RewardCreate(attempt=1, value=1.0), while_running=True)
    any_store.claim_attempts(1)
    early = any_store.add_reward("r", RewardCreate(id="w", attempt=1, value=1.0), while_running=True)
    any_store.add_event("r", EventCreate(kind="log", attempt=1), while_running=True)
    any_store.finish_attempt("r", 1, AttemptFinish(status="succeeded"))
    with pytest.raises(AttemptEnded, match=r"attempt 1 of rollout 'r' ended \(succeeded\)"):
        any_store.add_reward("r", RewardCreate(attempt=1, value=9.0), while_running=True)
    with pytest.raises(AttemptEnded):
        any_store.add_event("r", EventCreate(kind="log", attempt=1), while_running=True)
    assert any_store.add_reward("r", RewardCreate(id="w", attempt=1, value=1.0), while_running=True) == early
    assert [w.value for w in any_store.list_rewards("r")] == [1.0]


def test_model_calls_get_consecutive_seq_per_attempt(any_store: SqlStore, rollout_id: str) -> None:
    seqs = [any_store.add_model_call(model_call(f"c{i}")).seq for i in range(3)]
    assert seqs == [0, 1, 2]
    assert any_store.add_model_call(model_call("d0", attempt=2)).seq == 0
    assert any_store.add_model_call(model_call("c1")).seq == 1  # retried id: the stored call
    calls = any_store.list_model_calls(rollout_id, attempt=1)
    assert [c.id for c in calls] == ["c0", "c1", "c2"]
    assert calls[0].prompt_token_ids == [1, 2, 3] and calls[0].response_logprobs == [-0.5, -0.25]
    assert len(any_store.list_model_calls(rollout_id)) == 4


def test_a_model_call_reads_back_field_for_field(any_store: SqlStore, rollout_id: str) -> None:
    call = model_call("c0").model_copy(
        update={
            "trace_id": "ab" * 16,
            "span_id": "cd" * 8,
            "response": None,
            "extra_choices": [{"index": 1, "token_ids": [7], "logprobs": [-0.1]}],
            "policy_version": 3,
            "upstream": "u1",
            "latency_ms": 12.5,
            "status_code": 502,
            "error": "upstream broke",
            "streamed": True,
            "flags": ["missing_logprobs"],
        }
    )
    stored = any_store.add_model_call(call)
    assert stored == call.model_copy(update={"seq": 0})
    assert any_store.list_model_calls(rollout_id) == [stored]


def test_a_minus_infinity_logprob_is_kept(any_store: SqlStore, rollout_id: str) -> None:
    call = model_call("c0").model_copy(update={"response_logprobs": [float("-inf"), -1.0]})
    any_store.add_model_call(call)
    assert any_store.list_model_calls(rollout_id)[0].response_logprobs == [float("-inf"), -1.0]


def test_concurrent_model_calls_of_one_attempt_get_distinct_seqs(any_store: SqlStore, rollout_id: str) -> None:
    seqs: list[int] = []

    def worker(k: int) -> None:
        for i in range(5):
            seqs.append(any_store.add_model_call(model_call(f"c{k}-{i}")).seq)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(seqs) == list(range(20))


def test_spans_are_idempotent_and_need_a_known_rollout(any_store: SqlStore, rollout_id: str) -> None:
    span = SpanRecord(
        trace_id="a" * 32,
        span_id="b" * 16,
        rollout_id=rollout_id,
        attempt=1,
        name="alight.rollout",
        start_time_ns=1,
        attributes={"k": [1, 2]},
        events=[{"name": "alight.reward", "time_ns": 2, "attributes": {"alight.reward.value": 1.0}}],
    )
    other = span.model_copy(update={"span_id": "c" * 16, "start_time_ns": 2, "parent_span_id": "b" * 16})
    assert any_store.add_spans([span, other]) == 2
    assert any_store.add_spans([span]) == 0
    assert any_store.list_spans(rollout_id) == [span, other]
    with pytest.raises(NotFound, match="ghost"):
        any_store.add_spans([span.model_copy(update={"rollout_id": "ghost", "span_id": "d" * 16})])


def _span(rollout_id: str, attempt: int = 1, **update: object) -> SpanRecord:
    base = SpanRecord(
        trace_id="a" * 32, span_id="b" * 16, rollout_id=rollout_id, attempt=attempt, name="tool", start_time_ns=1
    )
    return base.model_copy(update=update)


def test_the_same_span_ids_from_another_rollout_are_stored_under_each(any_store: SqlStore, rollout_id: str) -> None:
    other = any_store.create_rollouts([RolloutCreate(id="squatter")])[0].id
    mine, theirs = _span(rollout_id, name="mine"), _span(other, name="theirs")
    assert any_store.add_spans([mine]) == 1
    assert any_store.add_spans([theirs]) == 1  # acknowledged and stored: the span is the squatter's own
    assert any_store.list_spans(rollout_id) == [mine]  # and never lands under the first rollout
    assert any_store.list_spans(other) == [theirs]


def test_a_span_exported_again_by_the_same_attempt_changes_nothing(any_store: SqlStore, rollout_id: str) -> None:
    first, second_attempt = _span(rollout_id), _span(rollout_id, attempt=2)
    assert any_store.add_spans([first, second_attempt]) == 2  # each attempt has its own
    assert any_store.add_spans([first.model_copy(update={"name": "rewritten"})]) == 0
    assert [s.name for s in any_store.list_spans(rollout_id, attempt=1)] == ["tool"]


def test_a_schema_1_store_is_migrated_with_its_spans(store_url: str) -> None:
    s = SqlStore(store_url)
    s.use_data_keys(None)  # content in the clear, as schema 1 kept it
    s.create_rollouts([RolloutCreate(id="r")])
    s.add_spans([_span("r")])
    s.close()
    engine = sa.create_engine(store_url)
    with engine.begin() as conn:  # what a store written by schema 1 has: spans keyed by (trace_id, span_id)
        conn.exec_driver_sql("CREATE TABLE spans_old AS SELECT * FROM spans")
        conn.exec_driver_sql("DROP TABLE spans")
        conn.exec_driver_sql("ALTER TABLE spans_old RENAME TO spans")
        if not store_url.startswith("sqlite"):  # (SQLite cannot add a primary key to a table; unkeyed is older still)
            conn.exec_driver_sql("ALTER TABLE spans ADD PRIMARY KEY (trace_id, span_id)")
        conn.exec_driver_sql("UPDATE schema_version SET version = 1")
    engine.dispose()
    s = SqlStore(store_url)
    assert [sp.name for sp in s.list_spans("r")] == ["tool"]
    s.create_rollouts([RolloutCreate(id="r2")])
    assert s.add_spans([_span("r2")]) == 1  # the new key: the same ids under another rollout
    with s.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT max(version) FROM schema_version")).scalar() == SCHEMA_VERSION
        assert sa.inspect(conn).get_pk_constraint("spans")["constrained_columns"] == [
            "rollout_id", "attempt", "trace_id", "span_id",
        ]  # fmt: skip
    s.close()


def test_upstreams_upsert_list_and_remove(any_store: SqlStore) -> None:
    u = any_store.add_upstream(UpstreamCreate(id="u1", url="http://h:1/v1", api_key_env="VLLM_KEY", model="m"))
    assert u.api_key_env == "VLLM_KEY"
    any_store.add_upstream(UpstreamCreate(id="u1", url="http://h:2/v1", policy_version=3))
    (listed,) = any_store.list_upstreams()
    assert (listed.url, listed.policy_version, listed.created_at) == ("http://h:2/v1", 3, u.created_at)
    any_store.remove_upstream("u1")
    assert any_store.list_upstreams() == []
    with pytest.raises(NotFound, match="u1"):
        any_store.remove_upstream("u1")


def test_a_newer_schema_version_is_refused_with_a_clear_message(store_url: str) -> None:
    SqlStore(store_url).close()
    engine = sa.create_engine(store_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE schema_version SET version = 99")
    engine.dispose()
    with pytest.raises(SchemaTooNew, match=r"schema version 99.*upgrade alight-server"):
        SqlStore(store_url)


def test_reopening_a_sqlite_file_keeps_everything(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'nested' / 'dir' / 'alight.db'}"
    (tmp_path / "kek").write_text("ab" * 32)
    kek = KekSource.parse(f"file:{tmp_path / 'kek'}")  # a lasting key: its sealed content opens again
    s = SqlStore(url, data_key=kek)
    s.create_rollouts([RolloutCreate(id="r", task={"a": 1})])
    s.add_event("r", EventCreate(kind="log"))
    s.close()
    s = SqlStore(url, data_key=kek)
    assert s.get_rollout("r").task == {"a": 1} and len(s.list_events("r")) == 1
    s.close()


def test_an_in_memory_store_works(tmp_path: Path) -> None:
    s = SqlStore("sqlite://")
    s.create_rollouts([RolloutCreate(id="r")])
    assert s.claim_attempts(1)[0][1] == 1
    s.close()


def test_a_missing_database_driver_names_the_extra_to_install() -> None:
    with pytest.raises(StoreError, match=r"pip install 'alight-server\[postgres\]'"):
        SqlStore("postgresql+pg8000://u@127.0.0.1:1/db")
