"""Attempt routes for the controller: claim the next attempts, record runner handles, finish attempts."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Path, Request

from alight.api_models import ClaimRequest, ClaimResult, RunnerHandle
from alight.schemas import Attempt, AttemptFinish, AttemptStart, AttemptStatus, EventCreate, Rollout
from alight_server.http.auth import issue_attempt_token
from alight_server.http.deps import AdminDep, ConfigDep, StoreDep
from alight_server.http.hooks import rollout_changed
from alight_server.store import Store

log = logging.getLogger("alight.server")
router = APIRouter(tags=["attempts"])

AttemptNumber = Annotated[int, Path(ge=1, le=2**31 - 1)]
# hook(store, rollout, attempt, finish): e.g. an evaluator that adds a reward before the attempt ends.
AttemptFinishedHook = Callable[[Store, Rollout, int, AttemptFinish], None]
# amend(store, rollout, attempt, finish) -> the finish to record (e.g. the gateway's budget verdict).
AttemptFinishAmend = Callable[[Store, Rollout, int, AttemptFinish], AttemptFinish]


@router.post("/attempts/claim", response_model=ClaimResult)
def claim_attempts(
    body: ClaimRequest, request: Request, store: StoreDep, config: ConfigDep, _: AdminDep
) -> ClaimResult:
    """Start the next attempt of up to `limit` waiting rollouts, each with its token and URLs."""
    base = config.base_url()
    secret: bytes = request.app.state.token_secret
    started = [
        AttemptStart(
            rollout=rollout,
            attempt=n,
            token=issue_attempt_token(secret, rollout.id, n, config.token_ttl_s),
            gateway_base_url=f"{base}/gw/{rollout.id}/{n}/v1",
            otlp_traces_endpoint=f"{base}/v1/traces",
        )
        for rollout, n in store.claim_attempts(body.limit, body.ids, body.runner)
    ]
    return ClaimResult(attempts=started)


@router.post("/rollouts/{rollout_id}/attempts/{attempt}/handle", response_model=Attempt)
def set_runner_handle(
    rollout_id: str, attempt: AttemptNumber, body: RunnerHandle, store: StoreDep, _: AdminDep
) -> Attempt:
    return store.set_runner_handle(rollout_id, attempt, body.runner_handle)


@router.post("/rollouts/{rollout_id}/attempts/{attempt}/finish", response_model=Rollout)
def finish_attempt(
    rollout_id: str, attempt: AttemptNumber, body: AttemptFinish, request: Request, store: StoreDep, _: AdminDep
) -> Rollout:
    """Record how the attempt ended, as amended by what the server knows; finished-attempt hooks (evaluators) run
    first, once."""
    rollout = store.get_rollout(rollout_id)
    amends: list[AttemptFinishAmend] = request.app.state.attempt_finish_amends
    for amend in amends:  # on a retried report too, so it matches what was recorded
        body = amend(store, rollout, attempt, body)
    if any(a.attempt == attempt and a.status == AttemptStatus.RUNNING for a in rollout.attempts):
        hooks: list[AttemptFinishedHook] = request.app.state.attempt_finished_hooks
        for hook in hooks:
            _run_hook(hook, store, rollout, attempt, body)
    finished = store.finish_attempt(rollout_id, attempt, body)
    rollout_changed(request.app, rollout_id)  # the gateway refuses the finished attempt's calls at once
    return finished


def _run_hook(hook: AttemptFinishedHook, store: Store, rollout: Rollout, attempt: int, finish: AttemptFinish) -> None:
    """A failing hook is recorded on the rollout; it never fails the controller's report."""
    name = getattr(hook, "__qualname__", repr(hook))
    try:
        hook(store, rollout, attempt, finish)
    except Exception as exc:
        log.warning("attempt-finished hook %s failed on rollout %s attempt %s: %r", name, rollout.id, attempt, exc)
        payload = {"hook": name, "error": f"{type(exc).__name__}: {exc}"[:2000]}
        store.add_event(rollout.id, EventCreate(kind="hook_error", attempt=attempt, payload=payload))
