"""The dashboard's rollout browsing: filters, totals and pages, on SQLite and PostgreSQL."""

from __future__ import annotations

from alight.schemas import AttemptFinish, EventCreate, FailureKind, Mode, RolloutCreate
from alight_server.store.browse import RolloutFilter
from alight_server.store.sql import SqlStore


def _fill(store: SqlStore) -> None:
    items = [
        RolloutCreate(id=f"runA-s{s:05d}-t000-k{k:02d}", group_id=f"runA-s{s:05d}-t000")
        for s in range(2)
        for k in range(3)
    ]
    items += [RolloutCreate(id="runA-val00000-t000-k00", mode=Mode.VAL), RolloutCreate(id="run_B-x")]
    store.create_rollouts(items)


def test_pages_cover_every_match_once_in_creation_order(any_store: SqlStore) -> None:
    _fill(any_store)
    where = RolloutFilter(id_prefix="runA-")
    pages = [any_store.browse_rollouts(where, offset=o, limit=3) for o in (0, 3, 6)]
    ids = [r.id for page, _ in pages for r in page]
    assert [total for _, total in pages] == [7, 7, 7]
    assert ids == [f"runA-s{s:05d}-t000-k{k:02d}" for s in range(2) for k in range(3)] + ["runA-val00000-t000-k00"]


def test_an_id_prefix_matches_underscores_and_percents_literally(any_store: SqlStore) -> None:
    _fill(any_store)
    assert any_store.browse_rollouts(RolloutFilter(id_prefix="run_"))[1] == 1  # not "any character"
    assert any_store.browse_rollouts(RolloutFilter(id_prefix="%"))[1] == 0


def test_mode_and_group_filters_narrow_the_listing(any_store: SqlStore) -> None:
    _fill(any_store)
    assert [r.id for r in any_store.browse_rollouts(RolloutFilter(mode=Mode.VAL))[0]] == ["runA-val00000-t000-k00"]
    assert any_store.browse_rollouts(RolloutFilter(group_id="runA-s00001-t000"))[1] == 3


def test_failure_kind_filter_looks_at_the_latest_attempt(any_store: SqlStore) -> None:
    _fill(any_store)
    rid = "runA-s00000-t000-k00"
    any_store.claim_attempts(1, ids=[rid])
    any_store.finish_attempt(rid, 1, AttemptFinish(status="failed", failure_kind=FailureKind.INFRA))
    assert [r.id for r in any_store.browse_rollouts(RolloutFilter(failure_kind=FailureKind.INFRA))[0]] == [rid]
    any_store.claim_attempts(1, ids=[rid])
    any_store.finish_attempt(rid, 2, AttemptFinish(status="failed", failure_kind=FailureKind.TASK))
    assert any_store.browse_rollouts(RolloutFilter(failure_kind=FailureKind.INFRA))[1] == 0
    assert any_store.browse_rollouts(RolloutFilter(failure_kind=FailureKind.TASK))[1] == 1


def test_rollouts_with_events_pages_those_with_one_kind_and_none_of_another(any_store: SqlStore) -> None:
    _fill(any_store)
    ids = [f"runA-s00000-t000-k{k:02d}" for k in range(3)]
    for rid, kinds in zip(ids, (["flag"], ["flag", "decision"], ["audit", "log"]), strict=True):
        for kind in kinds:
            any_store.add_event(rid, EventCreate(kind=kind))
    found, total = any_store.rollouts_with_events(("flag", "audit"), none_of=("decision",))
    assert ([r.id for r in found], total) == ([ids[0], ids[2]], 2)
    page, total = any_store.rollouts_with_events(("flag", "audit"), offset=1, limit=1)
    assert ([r.id for r in page], total) == ([ids[1]], 3)
