"""The trajectory join: an attempt's model calls (tokens, in gateway order) annotated with its spans and rewards.

A call's span is the one its recorded traceparent names, above the HTTP client span httpx instrumentation opens
around the request, so its span path (names from the root) ends at the agent's step; a call with no traceparent,
or whose span never arrived, keeps an empty path. Gate flags are the rollout's `reward_hacking` and `review_flag`
events of any attempt (the trainer's filter reads them here, with no request per rollout); `gated` says whether
its gates ran at all (the grader's `episode` event): the random audit draws only gated rollouts.
"""

from __future__ import annotations

from alight import semconv
from alight.evaluation import EPISODE
from alight.schemas import (
    REVIEW_DECISION,
    REVIEW_FLAG,
    REVIEW_REQUESTED,
    REWARD_HACKING,
    GateFlag,
    ModelCall,
    Reward,
    RewardSource,
    SpanRecord,
    ToolSpan,
    Trajectory,
    TrajectoryCall,
    review_state,
)
from alight_server.policies.routing import policy_of
from alight_server.policies.versions import own_version
from alight_server.store.base import NotFound, Store
from alight_server.trajectories.call_output import call_output

SPAN_KIND_CLIENT = 3  # OTLP SpanKind
HTTP_METHOD_ATTRS = ("http.request.method", "http.method")


def _is_http_client(span: SpanRecord) -> bool:
    return span.kind == SPAN_KIND_CLIENT and any(a in span.attributes for a in HTTP_METHOD_ATTRS)


def is_tool_span(span: SpanRecord) -> bool:
    if span.attributes.get(semconv.GEN_AI_OPERATION_NAME) == semconv.OP_EXECUTE_TOOL:
        return True
    return span.name.startswith(semconv.OP_EXECUTE_TOOL) or semconv.GEN_AI_TOOL_NAME in span.attributes


class SpanTree:
    """The attempt's spans by id, walked upwards."""

    def __init__(self, spans: list[SpanRecord]) -> None:
        self.by_id = {s.span_id: s for s in spans}

    def ancestry(self, span_id: str | None) -> list[SpanRecord]:
        """The span and its ancestors, nearest first; stops at a missing parent or a cycle."""
        chain: list[SpanRecord] = []
        seen: set[str] = set()
        while span_id is not None and span_id in self.by_id and span_id not in seen:
            seen.add(span_id)
            span = self.by_id[span_id]
            chain.append(span)
            span_id = span.parent_span_id
        return chain

    def calling_span(self, span_id: str | None) -> SpanRecord | None:
        """The span that made a call: its recorded span, above any HTTP client spans."""
        return next((span for span in self.ancestry(span_id) if not _is_http_client(span)), None)

    def path(self, span: SpanRecord | None) -> list[str]:
        return [s.name for s in reversed(self.ancestry(span.span_id))] if span else []

    def agent_name(self, span: SpanRecord | None) -> str | None:
        names = (s.attributes.get(semconv.GEN_AI_AGENT_NAME) for s in self.ancestry(span.span_id if span else None))
        return next((str(name) for name in names if name), None)


def _call_end_ns(call: ModelCall, tree: SpanTree) -> int:
    """When the agent had the answer: the HTTP span's end (agent clock), else when the gateway stored it."""
    recorded = tree.by_id.get(call.span_id or "")
    if recorded is not None and recorded.end_time_ns:
        return recorded.end_time_ns
    return int(call.created_at.timestamp() * 1e9)


def _tool_entry(span: SpanRecord, after_call: int, tree: SpanTree) -> ToolSpan:
    attrs = span.attributes
    return ToolSpan(
        span_id=span.span_id,
        parent_span_id=span.parent_span_id,
        name=span.name,
        tool_name=attrs.get(semconv.GEN_AI_TOOL_NAME),
        tool_call_id=attrs.get(semconv.GEN_AI_TOOL_CALL_ID),
        arguments=attrs.get(semconv.GEN_AI_TOOL_CALL_ARGUMENTS),
        result=attrs.get(semconv.GEN_AI_TOOL_CALL_RESULT),
        start_time_ns=span.start_time_ns,
        end_time_ns=span.end_time_ns,
        status_code=span.status_code,
        after_call=after_call,
        span_path=tree.path(span),
        agent_name=tree.agent_name(span),
    )


# Whose final reward counts: a judge's (its unnamed final reward already combines the others by weight,
# trainer/judge/rewards.py), then an evaluator's over the agent's own, the agent's over a fallback.
SOURCE_PRECEDENCE = (RewardSource.JUDGE, RewardSource.EVALUATOR, RewardSource.AGENT, RewardSource.FALLBACK)


def final_reward(rewards: list[Reward]) -> float | None:
    """The primary final reward of the highest-precedence source that gave one:
    its latest unnamed final reward, else its first named one."""
    finals = sorted((r for r in rewards if r.final), key=lambda r: r.created_at)
    if finals:
        best = min(SOURCE_PRECEDENCE.index(r.source) for r in finals)
        finals = [r for r in finals if r.source is SOURCE_PRECEDENCE[best]]
    unnamed = [r for r in finals if r.name is None]
    if unnamed:
        return unnamed[-1].value
    return finals[0].value if finals else None


def build_trajectory(store: Store, rollout_id: str, attempt: int | None = None) -> Trajectory:
    """Join one attempt (default: the latest) of a rollout. NotFound for an unknown rollout or attempt."""
    rollout = store.get_rollout(rollout_id)
    if attempt is None and not rollout.attempts:
        raise NotFound(f"rollout {rollout_id!r} has no attempts yet (state {rollout.state.value}); nothing to show")
    number = attempt if attempt is not None else max(a.attempt for a in rollout.attempts)
    record = next((a for a in rollout.attempts if a.attempt == number), None)
    if record is None:
        known = sorted(a.attempt for a in rollout.attempts)
        raise NotFound(f"rollout {rollout_id!r} has no attempt {number}; its attempts are {known}")
    calls = sorted(store.list_model_calls(rollout_id, number), key=lambda c: c.seq)
    tree = SpanTree(store.list_spans(rollout_id, number))
    rewards = store.list_rewards(rollout_id, attempt=number)
    callers = [tree.calling_span(c.span_id) for c in calls]
    joined = _joined_calls(store, calls, callers, tree, _step_rewards(calls, callers, rewards, tree))
    tool_spans = _tool_spans(calls, tree)
    events = store.list_events(
        rollout_id, kind=(REWARD_HACKING, REVIEW_FLAG, REVIEW_REQUESTED, REVIEW_DECISION, EPISODE)
    )
    gates = [e for e in events if e.kind in (REWARD_HACKING, REVIEW_FLAG)]
    decisions = [str(e.payload.get("decision")) for e in events if e.kind == REVIEW_DECISION]
    return Trajectory(
        rollout_id=rollout.id,
        attempt=number,
        group_id=rollout.group_id,
        mode=rollout.mode,
        state=rollout.state,
        attempt_status=record.status,
        failure_kind=record.failure_kind,
        calls=joined,
        tool_spans=tool_spans,
        rewards=rewards,
        final_reward=final_reward(rewards),
        task=rollout.task,
        gate_flags=[GateFlag(kind=e.kind, rule=str(e.payload.get("rule", "")), attempt=e.attempt) for e in gates],
        review=review_state((e.kind for e in events), decisions[0] if decisions else None),
        gated=any(e.kind == EPISODE for e in events),
    )


def _step_rewards(
    calls: list[ModelCall], callers: list[SpanRecord | None], rewards: list[Reward], tree: SpanTree
) -> dict[str, list[Reward]]:
    """The non-final rewards linked to a call, by call id: by model_call_id, or by a span the call was made
    under; a step reward on a span scores the last call that span made (the root's rewards score the rollout)."""
    root_ids = {s.span_id for s in tree.by_id.values() if s.name == semconv.SPAN_ROLLOUT}
    last_call_of_span: dict[str, str] = {}
    for call, caller in zip(calls, callers, strict=True):
        for span_id in {call.span_id, caller.span_id if caller else None} - {None} - root_ids:
            last_call_of_span[str(span_id)] = call.id
    per_call: dict[str, list[Reward]] = {}
    for reward in rewards:
        if reward.final:
            continue
        target = reward.model_call_id or last_call_of_span.get(reward.span_id or "")
        if target is not None:
            per_call.setdefault(target, []).append(reward)
    return per_call


def _joined_calls(
    store: Store,
    calls: list[ModelCall],
    callers: list[SpanRecord | None],
    tree: SpanTree,
    per_call: dict[str, list[Reward]],
) -> list[TrajectoryCall]:
    """Each call with its span path, agent, step rewards, read answer, and its policy with that policy's own
    version (the version history is read only in a several-policy run)."""
    policies = [policy_of(call.flags) for call in calls]
    history = store.list_policy_versions() if any(policies) else []
    return [
        TrajectoryCall(
            call=call,
            span_path=tree.path(caller),
            agent_name=tree.agent_name(caller),
            rewards=per_call.get(call.id, []),
            output=call_output(call),
            policy=policy,
            policy_own_version=None
            if policy is None or call.policy_version is None
            else own_version(history, policy, upto=call.policy_version),
        )
        for call, caller, policy in zip(calls, callers, policies, strict=True)
    ]


def _tool_spans(calls: list[ModelCall], tree: SpanTree) -> list[ToolSpan]:
    """The tool spans in start order, each with the index of the last call answered before it began."""
    ends = [_call_end_ns(c, tree) for c in calls]
    tools = sorted((s for s in tree.by_id.values() if is_tool_span(s)), key=lambda s: s.start_time_ns)
    return [
        _tool_entry(s, max((i for i, end in enumerate(ends) if end <= s.start_time_ns), default=-1), tree)
        for s in tools
    ]
