"""Rollout routes: batch create, list with a seq cursor, get, status moves, cancel, events, rewards, wait."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from alight.api_models import (
    EventList,
    RewardList,
    RolloutBatch,
    RolloutList,
    RolloutPage,
    RolloutQuery,
    StatusChange,
    WaitRequest,
    WaitResult,
)
from alight.schemas import TERMINAL_STATES, Event, EventCreate, Reward, RewardCreate, Rollout, RolloutState
from alight_server.api.reviews import check_event_kind
from alight_server.http.deps import AdminDep, ReaderDep, RedactionDep, StoreDep, WriterDep, viewer_copy
from alight_server.http.hooks import rollout_changed
from alight_server.redaction.views import redact_rollout

router = APIRouter(tags=["rollouts"])

RolloutId = Annotated[str, "rollout id"]


@router.post("/rollouts", response_model=RolloutList)
def create_rollouts(body: RolloutBatch, store: StoreDep, _: AdminDep) -> RolloutList:
    """Create rollouts; an id that exists with the same body returns the stored rollout (409 if the body differs)."""
    return RolloutList(rollouts=store.create_rollouts(body.rollouts))


@router.get("/rollouts", response_model=RolloutPage)
def list_rollouts(
    request: Request, store: StoreDep, caller: ReaderDep, query: Annotated[RolloutQuery, Query()]
) -> RolloutPage:
    """Rollouts changed after `since_seq`, oldest change first; pass `next_seq` back to continue.

    A viewer key reads each task and attempt message redacted; the admin key (the controller) as given.
    """
    found = store.list_rollouts(query)
    if (redactor := viewer_copy(request, caller)) is not None:
        found = [redact_rollout(redactor, r) for r in found]
    return RolloutPage(rollouts=found, next_seq=found[-1].seq if found else query.since_seq)


@router.post("/rollouts/wait", response_model=WaitResult)
async def wait_for_rollouts(body: WaitRequest, request: Request, store: StoreDep, _: AdminDep) -> WaitResult:
    """Long-poll until every listed rollout is final or `timeout_s` passes; unknown ids are a 404."""
    ids = list(dict.fromkeys(body.ids))
    deadline = time.monotonic() + body.timeout_s
    pause = 0.05
    while True:
        found = await run_in_threadpool(store.list_rollouts, RolloutQuery(ids=ids, limit=len(ids)))
        if unknown := set(ids) - {r.id for r in found}:  # get_rollout raises NotFound naming the first
            await run_in_threadpool(store.get_rollout, next(rid for rid in ids if rid in unknown))
        done = [r for r in found if r.state in TERMINAL_STATES]
        # Stop at the deadline, or early when the caller has hung up: nobody would read the answer.
        if len(done) == len(ids) or time.monotonic() >= deadline or await request.is_disconnected():
            finished = {r.id for r in done}
            return WaitResult(done=done, pending=[rid for rid in ids if rid not in finished])
        await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, 0.5)


@router.get("/rollouts/{rollout_id}", response_model=Rollout)
def get_rollout(rollout_id: RolloutId, request: Request, store: StoreDep, caller: ReaderDep) -> Rollout:
    """The rollout as given to the admin key (the controller hands its task to the agent); redacted to a viewer key."""
    rollout = store.get_rollout(rollout_id)
    redactor = viewer_copy(request, caller)
    return redact_rollout(redactor, rollout) if redactor is not None else rollout


@router.post("/rollouts/{rollout_id}/status", response_model=Rollout)
def change_status(rollout_id: RolloutId, body: StatusChange, request: Request, store: StoreDep, _: AdminDep) -> Rollout:
    """Move the rollout through the state machine; an illegal move is a 409 naming the allowed ones."""
    moved = store.transition(rollout_id, body.state)
    rollout_changed(request.app, rollout_id)  # the gateway re-reads the rollout's state on its next call
    return moved


@router.post("/rollouts/{rollout_id}/cancel", response_model=Rollout)
def cancel_rollout(rollout_id: RolloutId, request: Request, store: StoreDep, _: AdminDep) -> Rollout:
    cancelled = store.transition(rollout_id, RolloutState.CANCELLED)
    rollout_changed(request.app, rollout_id)  # the gateway refuses the cancelled rollout's calls at once
    return cancelled


@router.post("/rollouts/{rollout_id}/events", response_model=Event)
def add_event(rollout_id: RolloutId, body: EventCreate, store: StoreDep, caller: WriterDep) -> Event:
    """Admin, or an agent for its own running attempt (the attempt defaults to the token's; 409 once it ended)."""
    if caller.attempt is not None and body.attempt is None:
        body = body.model_copy(update={"attempt": caller.attempt.attempt})
    caller.require_attempt(rollout_id, body.attempt)
    check_event_kind(caller, body.kind)
    return store.add_event(rollout_id, body, while_running=not caller.admin)


@router.get("/rollouts/{rollout_id}/events", response_model=EventList)
def list_events(
    rollout_id: RolloutId,
    store: StoreDep,
    redaction: RedactionDep,
    attempt: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
    kind: Annotated[str | None, Query(max_length=100)] = None,
) -> EventList:
    """The rollout's events (attempt logs, gate evidence, ...), their payloads redacted unless `reveal=true`."""
    events = store.list_events(rollout_id, attempt=attempt, kind=kind)
    if redaction is not None:
        events = [e.model_copy(update={"payload": redaction.redact_json(e.payload)}) for e in events]
    return EventList(events=events)


@router.post("/rollouts/{rollout_id}/rewards", response_model=Reward)
def add_reward(rollout_id: RolloutId, body: RewardCreate, store: StoreDep, caller: WriterDep) -> Reward:
    """Admin, or an agent for its own running attempt (409 once it ended). NaN and infinities are refused.

    The credential decides the source: an attempt token's rewards are `agent` (a body claiming
    another source is a 403); the admin's are `evaluator`, or `fallback` or `judge` when the body says so.
    """
    caller.require_attempt(rollout_id, body.attempt)
    return store.add_reward(
        rollout_id,
        body.model_copy(update={"source": caller.reward_source(body.source)}),
        while_running=not caller.admin,
    )


@router.get("/rollouts/{rollout_id}/rewards", response_model=RewardList)
def list_rewards(
    rollout_id: RolloutId,
    store: StoreDep,
    _: ReaderDep,
    attempt: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
) -> RewardList:
    return RewardList(rewards=store.list_rewards(rollout_id, attempt=attempt))
