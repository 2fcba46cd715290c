"""Sessions into the store as a run of offline rollouts: exact calls as recorded, the rest rendered and flagged.

Each session is one ended rollout `NAME-<content hash>`, so re-importing the same content stores nothing new; a
call that cannot be rendered is left out, recorded as an UNRENDERED_EVENT on its rollout.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from alight.schemas import (
    RENDERED_FLAG,
    ApiFlavour,
    EventCreate,
    Mode,
    ModelCall,
    RewardCreate,
    RewardSource,
    RolloutCreate,
    RunReport,
    RunStatus,
)
from alight_server.store.base import Store, StoreError
from alight_server.store.rows import now
from alight_server.traces.model import Parsed, RecordError, TraceCall, TraceSession
from alight_server.traces.render import Renderer, RenderError

UNRENDERED_EVENT = "alight.import.unrendered"
OFFLINE_KEY = "offline"  # rollout metadata: {"offline": {"format", "source", "run"}} marks an imported rollout


class CallRefused(ValueError):
    """A call whose recorded ids or logprobs cannot be what a model produced (out of the vocabulary, > 0)."""


@dataclass
class ImportReport:
    sessions: int = 0
    new_rollouts: int = 0
    calls: Counter[str] = field(default_factory=Counter)  # exact / rendered / left out
    errors: list[RecordError] = field(default_factory=list)

    def lines(self, name: str) -> list[str]:
        out = [
            f"imported {self.sessions} sessions into run {name!r} ({self.new_rollouts} new rollouts, "
            f"{self.sessions - self.new_rollouts} already there): {self.calls['exact']} exact calls, "
            f"{self.calls['rendered']} rendered, {self.calls['left_out']} left out"
        ]
        out.extend(f"  skipped {error}" for error in self.errors)
        return out


def rollout_id(name: str, fmt: str, session: TraceSession) -> str:
    return f"{name}-{session.digest(fmt)}"


def group_id(name: str, session: TraceSession, task_key: str | None) -> str | None:
    """The task group: the source's own (alight's export), else the task's `task_key` value, else none."""
    if session.group:
        return session.group
    value = session.task.get(task_key) if task_key is not None and isinstance(session.task, dict) else None
    if value is None:
        return None
    digest = hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return f"{name}-task-{digest}"


def import_traces(
    store: Store, name: str, fmt: str, parsed: Parsed, renderer: Renderer | None, *, task_key: str | None = None
) -> ImportReport:
    report = ImportReport(errors=list(parsed.errors))
    config: dict[str, Any] = {OFFLINE_KEY: {"format": fmt}}
    if renderer is not None:  # the policy the text was rendered for: the dashboard decodes its tokens with it
        config["model"] = renderer.name
    store.report_run(RunReport(id=name, status=RunStatus.SUCCEEDED, config=config))
    for session in parsed.sessions:
        try:
            created = _store_session(store, name, fmt, session, renderer, task_key, report)
        except (StoreError, ValidationError, ValueError) as exc:  # the session's own content: say which, go on
            report.errors.append(RecordError(f"session {session.key}", f"not imported: {_reason(exc)}"))
            continue
        report.sessions += 1
        report.new_rollouts += created
    return report


def _store_session(
    store: Store,
    name: str,
    fmt: str,
    session: TraceSession,
    renderer: Renderer | None,
    task_key: str | None,
    report: ImportReport,
) -> bool:
    """One session as one offline rollout with its calls, events and rewards; whether the rollout is new."""
    rid = rollout_id(name, fmt, session)
    source = session.source_rollout or {}
    mode = Mode(source["mode"]) if source.get("mode") in ("train", "val") else Mode.TRAIN
    metadata: dict[str, Any] = {OFFLINE_KEY: {"format": fmt, "source": session.key, "run": name}}
    if source:
        metadata[OFFLINE_KEY]["exported"] = {k: source.get(k) for k in ("state", "policy_version", "mode")}
    item = RolloutCreate(
        id=rid, task=session.task, mode=mode, group_id=group_id(name, session, task_key), metadata=metadata
    )
    rewards = [
        RewardCreate(
            id=f"import-{i}", attempt=1, value=r.value, name=r.name, final=r.final,
            source=RewardSource(r.source) if r.source in RewardSource.__members__.values() else RewardSource.AGENT,
        )
        for i, r in enumerate(session.rewards)
    ]  # fmt: skip
    counted = ImportReport()  # into `report` once the session is stored
    calls, events = _calls(rid, session, renderer, counted)
    [(_, created)] = store.add_offline_rollouts([item])
    store.add_model_calls(calls)
    for event in events:
        store.add_event(rid, event)
    for reward in rewards:
        store.add_reward(rid, reward)
    report.calls.update(counted.calls)
    report.errors.extend(counted.errors)
    return created


def _calls(
    rid: str, session: TraceSession, renderer: Renderer | None, report: ImportReport
) -> tuple[list[ModelCall], list[EventCreate]]:
    calls: list[ModelCall] = []
    events: list[EventCreate] = []
    for n, call in enumerate(session.calls):
        try:
            calls.append(_model_call(rid, n, call, renderer))
            report.calls["exact" if call.exact else "rendered"] += 1
        except (RenderError, CallRefused) as exc:
            report.calls["left_out"] += 1
            report.errors.append(RecordError(f"session {session.key} call {n}", str(exc)))
            payload = {"call": n, "message": str(exc)}
            events.append(EventCreate(id=f"unrendered-{n}", attempt=1, kind=UNRENDERED_EVENT, payload=payload))
    return calls, events


def _model_call(rid: str, n: int, call: TraceCall, renderer: Renderer | None) -> ModelCall:
    if call.problem is not None:
        raise RenderError(call.problem)
    flags: list[str] = []
    if call.exact:
        prompt_ids, response_ids = list(call.prompt_token_ids or []), list(call.response_token_ids or [])
        logprobs = list(call.response_logprobs or [])
        _check_recorded(prompt_ids + response_ids, logprobs, renderer)
    elif renderer is None:
        raise RenderError(
            "the call has no recorded token ids and no model was given to render it: pass --model or --config"
        )
    else:
        prompt_ids, response_ids = renderer.render(call)
        logprobs, flags = [], [RENDERED_FLAG]
    request = call.request or {
        "model": call.model,
        "messages": call.messages,
        **({"tools": call.tools} if call.tools else {}),
    }
    response = call.response or {
        "object": "chat.completion",
        "model": call.model,
        "choices": [{"index": 0, "message": call.reply, "finish_reason": call.finish_reason or "stop"}],
    }
    flavour = call.flavour if call.request is not None and call.flavour in ApiFlavour.__members__.values() else "chat"
    return ModelCall(
        id=f"{rid}-{n}",
        rollout_id=rid,
        attempt=1,
        seq=n,
        flavour=ApiFlavour(flavour),
        request=request,
        response=response,
        prompt_token_ids=prompt_ids,
        response_token_ids=response_ids,
        response_logprobs=logprobs,
        policy_version=call.policy_version,
        status_code=200,
        flags=flags,
        created_at=now(),
    )


def _check_recorded(ids: list[int], logprobs: list[float], renderer: Renderer | None) -> None:
    """Recorded ids and logprobs come from a file anyone could have written: ids inside the policy's vocabulary
    (an id past it would index outside the embedding when trained), logprobs never above 0 nor NaN."""
    vocab = renderer.vocab_size if renderer is not None else None
    bad = next((i for i in ids if i < 0 or (vocab is not None and i >= vocab)), None)
    if bad is not None:
        within = f" of {renderer.name} ({vocab} tokens)" if renderer is not None else ""
        raise CallRefused(f"token id {bad} is outside the vocabulary{within}: not ids this policy produced")
    if any(not lp <= 0.0 for lp in logprobs):  # NaN fails the comparison too
        raise CallRefused("a recorded logprob is above 0 or NaN: not the log of a probability")


def _reason(exc: Exception) -> str:
    """A validation error in one line: where in the rollout, reward or call, and what is wrong."""
    if isinstance(exc, ValidationError):
        return "; ".join(f"{exc.title}.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
    return str(exc)
