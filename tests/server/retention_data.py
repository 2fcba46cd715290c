"""Rollouts with something in every table under them (a model call, a span, an event, a reward), for purge tests."""

from __future__ import annotations

from pathlib import Path

from alight.schemas import (
    ApiFlavour,
    AttemptFinish,
    EventCreate,
    ModelCall,
    RewardCreate,
    RolloutCreate,
    RunReport,
    RunStatus,
    SpanRecord,
)
from alight_server.store import Store
from alight_server.store.rows import now

TABLES = ("model_calls", "spans", "events", "rewards", "attempts", "rollouts")


def started(store: Store, rollout_id: str, group: str | None = None, run_dir: Path | None = None) -> int:
    """A rollout created and claimed (running), with one of each row under its attempt; the attempt number."""
    metadata = {"run_dir": str(run_dir)} if run_dir else {}
    store.create_rollouts([RolloutCreate(id=rollout_id, task={"q": "what is 2+2"}, group_id=group, metadata=metadata)])
    ((_, attempt),) = store.claim_attempts(1, ids=[rollout_id])
    text = f"content of {rollout_id} " * 400  # ~10 KB a call: enough for a purge to free pages
    store.add_model_call(
        ModelCall(
            id=f"{rollout_id}-c0", rollout_id=rollout_id, attempt=attempt, seq=0, flavour=ApiFlavour.CHAT,
            request={"messages": [{"role": "user", "content": text}]},
            response={"choices": [{"message": {"role": "assistant", "content": text}}]},
            prompt_token_ids=list(range(500)), response_token_ids=list(range(200)),
            response_logprobs=[-0.5] * 200, status_code=200, created_at=now(),
        )
    )  # fmt: skip
    store.add_spans(
        [SpanRecord(trace_id="a" * 32, span_id="b" * 16, rollout_id=rollout_id, attempt=attempt, name="alight.rollout",
                    start_time_ns=1, attributes={"note": text[:200]})]
    )  # fmt: skip
    store.add_event(rollout_id, EventCreate(kind="log", attempt=attempt, payload={"text": text[:500]}))
    # The reward's name is a marker that stays clear text whatever the store encrypts (a test looks for it).
    store.add_reward(rollout_id, RewardCreate(attempt=attempt, value=1.0, final=True, name=marker(rollout_id)))
    return attempt


def ended(store: Store, rollout_id: str, group: str | None = None, run_dir: Path | None = None) -> str:
    """A rollout that ran and succeeded, with one of each row under it; its id."""
    attempt = started(store, rollout_id, group, run_dir)
    store.finish_attempt(rollout_id, attempt, AttemptFinish(status="succeeded"))
    return rollout_id


def marker(rollout_id: str) -> str:
    return f"marker of {rollout_id}"


def run(store: Store, run_id: str, status: str = "running") -> None:
    store.report_run(RunReport(id=run_id, status=RunStatus(status)))


def group(store: Store, prefix: str, n: int = 2, run_dir: Path | None = None) -> list[str]:
    """A finished group of `n` rollouts named as the trainer names them (`<prefix>-k00`, ...)."""
    ids = [f"{prefix}-k{k:02d}" for k in range(n)]
    for rid in ids:
        ended(store, rid, prefix, run_dir)
    return ids
