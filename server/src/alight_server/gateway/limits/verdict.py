"""How an attempt that ran past its budget ends: `budget_exceeded`, reward 0, whatever its runner reported.

A task failure, never an infra one (those are retried and skipped): a policy must not learn that running
out of budget buys it a skipped sample. The gateway writes the breach as the attempt's `budget_exceeded`
event when it first refuses a call; the attempt's finish report is amended here, before it is recorded.
"""

from __future__ import annotations

from alight.schemas import AttemptFinish, EventCreate, FailureKind, RewardCreate, RewardSource, Rollout
from alight_server.gateway.limits.refusals import Refusal
from alight_server.store.base import Store

BUDGET_EVENT = FailureKind.BUDGET.value


def breach_event(attempt: int, refusal: Refusal) -> EventCreate:
    """The attempt's one breach record (a fixed id: a second replica's write is the same row)."""
    payload = {"limit": refusal.limit, "message": refusal.message}
    return EventCreate(id=f"budget-exceeded-{attempt}", attempt=attempt, kind=BUDGET_EVENT, payload=payload)


def budget_verdict(store: Store, rollout: Rollout, attempt: int, finish: AttemptFinish) -> AttemptFinish:
    """`finish` as reported, or failed/budget_exceeded with a final reward of 0 when the gateway recorded a breach."""
    breaches = store.list_events(rollout.id, attempt=attempt, kind=BUDGET_EVENT)
    if not breaches:
        return finish
    # The evaluator's source: it outranks whatever the agent reported (trajectories/join.py final_reward).
    zero = RewardCreate(id=f"budget-{attempt}", attempt=attempt, value=0.0, final=True, source=RewardSource.EVALUATOR)
    store.add_reward(rollout.id, zero)
    reported = finish.status + (f"/{finish.failure_kind.value}" if finish.failure_kind else "")
    said = f": {finish.message}" if finish.message else ""
    message = f"{breaches[0].payload.get('message', 'over its budget')} (its runner reported {reported}{said})"
    return AttemptFinish(
        status="failed",
        failure_kind=FailureKind.BUDGET,
        exit_code=finish.exit_code,
        message=message[:20000],
        runner_handle=finish.runner_handle,
    )
