"""Store contract: claiming attempts, finishing them, retry rules."""

from __future__ import annotations

import threading

import pytest

from alight.schemas import AttemptFinish, AttemptStatus, FailureKind, RolloutCreate, RolloutState
from alight_server.store import Conflict, NotFound
from alight_server.store.sql import SqlStore

INFRA = AttemptFinish(status="failed", failure_kind=FailureKind.INFRA, message="node lost")


def _claim_one(store: SqlStore, rollout_id: str) -> int:
    ((rollout, attempt),) = store.claim_attempts(1, ids=[rollout_id])
    assert rollout.state == RolloutState.RUNNING
    return attempt


def test_claim_starts_attempt_one_and_runs_the_rollout(any_store: SqlStore) -> None:
    any_store.create_rollouts([RolloutCreate(id="r")])
    ((rollout, attempt),) = any_store.claim_attempts(5)
    assert attempt == 1 and rollout.state == RolloutState.RUNNING
    assert [(a.attempt, a.status) for a in rollout.attempts] == [(1, AttemptStatus.RUNNING)]
    assert any_store.claim_attempts(5) == []


def test_a_claim_by_a_named_runner_records_each_attempts_handle_in_the_same_write(any_store: SqlStore) -> None:
    any_store.create_rollouts([RolloutCreate(id="a"), RolloutCreate(id="b")])
    any_store.claim_attempts(1, ids=["a"], runner="local@host")
    any_store.claim_attempts(1, ids=["b"])
    assert any_store.get_rollout("a").attempts[0].runner_handle == "local@host/a/1"
    assert any_store.get_rollout("b").attempts[0].runner_handle is None


def test_claim_takes_oldest_first_and_honours_limit_and_ids(any_store: SqlStore) -> None:
    any_store.create_rollouts([RolloutCreate(id=f"r{i}") for i in range(4)])
    assert [r.id for r, _ in any_store.claim_attempts(2)] == ["r0", "r1"]
    assert [r.id for r, _ in any_store.claim_attempts(5, ids=["r3"])] == ["r3"]
    assert any_store.claim_attempts(0) == []


def test_concurrent_claims_never_start_a_rollout_twice(any_store: SqlStore) -> None:
    any_store.create_rollouts([RolloutCreate(id=f"r{i}") for i in range(30)])
    claimed: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(10):
            got = any_store.claim_attempts(2)
            with lock:
                claimed.extend(r.id for r, _ in got)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(claimed) == sorted(f"r{i}" for i in range(30))


def test_success_finishes_the_rollout(any_store: SqlStore) -> None:
    any_store.create_rollouts([RolloutCreate(id="r")])
    n = _claim_one(any_store, "r")
    r = any_store.finish_attempt("r", n, AttemptFinish(status="succeeded", exit_code=0, runner_handle="pid:7"))
    assert r.state == RolloutState.SUCCEEDED
    assert r.attempts[0].status == AttemptStatus.SUCCEEDED and r.attempts[0].ended_at is not None
    assert r.attempts[0].runner_handle == "pid:7"


def test_task_failure_fails_the_rollout_without_retry(any_store: SqlStore) -> None:
    any_store.create_rollouts([RolloutCreate(id="r", max_attempts=3)])
    n = _claim_one(any_store, "r")
    r = any_store.finish_attempt("r", n, AttemptFinish(status="failed", exit_code=1))
    assert r.state == RolloutState.FAILED and r.attempts[0].failure_kind == FailureKind.TASK
    assert any_store.claim_attempts(1) == []


def test_infra_failure_is_retried_as_a_new_attempt(any_store: SqlStore) -> None:
    any_store.create_rollouts([RolloutCreate(id="r", max_attempts=2)])
    any_store.finish_attempt("r", _claim_one(any_store, "r"), INFRA)
    assert any_store.get_rollout("r").state == RolloutState.RUNNING
    assert _claim_one(any_store, "r") == 2


def test_last_allowed_attempt_failing_on_timeout_fails_the_rollout(any_store: SqlStore) -> None:
    any_store.create_rollouts([RolloutCreate(id="r", max_attempts=1)])
    n = _claim_one(any_store, "r")
    r = any_store.finish_attempt("r", n, AttemptFinish(status="failed", failure_kind=FailureKind.TIMEOUT))
    assert r.state == RolloutState.FAILED and r.attempts[0].failure_kind == FailureKind.TIMEOUT


def test_finishing_twice_the_same_way_is_a_no_op(any_store: SqlStore) -> None:
    any_store.create_rollouts([RolloutCreate(id="r")])
    n = _claim_one(any_store, "r")
    first = any_store.finish_attempt("r", n, AttemptFinish(status="succeeded"))
    assert any_store.finish_attempt("r", n, AttemptFinish(status="succeeded")).seq == first.seq


def test_finishing_twice_with_another_outcome_is_a_conflict(any_store: SqlStore) -> None:
    any_store.create_rollouts([RolloutCreate(id="r")])
    n = _claim_one(any_store, "r")
    any_store.finish_attempt("r", n, AttemptFinish(status="succeeded"))
    with pytest.raises(Conflict, match="already finished as succeeded"):
        any_store.finish_attempt("r", n, AttemptFinish(status="failed"))


def test_cancelling_a_running_rollout_fails_its_attempt_and_a_late_finish_is_ignored(any_store: SqlStore) -> None:
    any_store.create_rollouts([RolloutCreate(id="r")])
    n = _claim_one(any_store, "r")
    r = any_store.transition("r", RolloutState.CANCELLED)
    assert r.attempts[0].status == AttemptStatus.FAILED and r.attempts[0].failure_kind is None
    late = any_store.finish_attempt("r", n, AttemptFinish(status="succeeded"))
    assert late.state == RolloutState.CANCELLED


def test_finishing_an_unknown_attempt_is_not_found(any_store: SqlStore) -> None:
    any_store.create_rollouts([RolloutCreate(id="r")])
    with pytest.raises(NotFound, match="no attempt 1"):
        any_store.finish_attempt("r", 1, AttemptFinish(status="succeeded"))
    with pytest.raises(NotFound):
        any_store.set_runner_handle("r", 1, "pid:1")
