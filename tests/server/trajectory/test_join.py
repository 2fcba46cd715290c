"""The trajectory join over hand-built calls, spans and rewards, read through the API."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from alight import semconv
from alight.schemas import AttemptFinish, FailureKind, ModelCall, RewardCreate, RolloutCreate, SpanRecord, Trajectory

pytestmark = pytest.mark.timeout(60)
TRACE = "1" * 32


def span(span_id: str, name: str, parent: str | None, start: int, end: int, kind: int = 1, **attributes) -> SpanRecord:
    return SpanRecord(
        trace_id=TRACE,
        span_id=span_id * 16,
        parent_span_id=parent * 16 if parent else None,
        rollout_id="r-join",
        attempt=1,
        name=name,
        kind=kind,
        start_time_ns=start,
        end_time_ns=end,
        attributes=attributes,
    )


def http_span(span_id: str, parent: str, start: int, end: int) -> SpanRecord:
    return span(span_id, "POST", parent, start, end, kind=3, **{"http.request.method": "POST"})


def call(call_id: str, span_id: str | None) -> ModelCall:
    return ModelCall(
        id=call_id,
        rollout_id="r-join",
        attempt=1,
        seq=0,
        trace_id=TRACE if span_id else None,
        span_id=span_id * 16 if span_id else None,
        flavour="chat",
        request={"messages": [{"role": "user", "content": call_id}]},
        response={"choices": []},
        prompt_token_ids=[1, 2],
        response_token_ids=[3],
        response_logprobs=[-0.5],
        status_code=200,
        created_at=datetime.now(UTC),
    )


@pytest.fixture
def joined_attempt(live_server):
    """root -> planner (agent) -> step -> HTTP -> call a; root -> coder (agent) -> HTTP -> call b;
    a tool span between a and b; call c with no span; a failed task attempt."""
    store = live_server.store
    store.create_rollouts([RolloutCreate(id="r-join", task={"q": 1}, group_id="g1")])
    store.claim_attempts(1, ids=["r-join"])
    store.add_spans(
        [
            span("a", semconv.SPAN_ROLLOUT, None, 0, 100),
            span("b", "planner", "a", 1, 30, **{semconv.GEN_AI_AGENT_NAME: "planner"}),
            span("c", "step", "b", 2, 20),
            http_span("d", "c", 3, 10),
            span(
                "e",
                f"{semconv.OP_EXECUTE_TOOL} calc",
                "a",
                40,
                45,
                **{semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL, semconv.GEN_AI_TOOL_NAME: "calc"},
            ),
            span("f", "coder", "a", 50, 80, **{semconv.GEN_AI_AGENT_NAME: "coder"}),
            http_span("0", "f", 51, 60),
        ]
    )
    for c in (call("call-a", "d"), call("call-b", "0"), call("call-c", None)):
        store.add_model_call(c)
    rewards = [
        RewardCreate(id="w1", attempt=1, value=0.1, name="format", span_id="c" * 16),  # on call a's step span
        RewardCreate(id="w2", attempt=1, value=0.2, name="direct", model_call_id="call-b"),
        RewardCreate(id="w3", attempt=1, value=1.0, final=True, span_id="a" * 16),
        RewardCreate(id="w4", attempt=1, value=0.3, name="root-step", span_id="a" * 16),  # the root scores no call
        RewardCreate(id="w5", attempt=1, value=0.4, name="on-http", span_id="0" * 16),  # the recorded span itself
    ]
    for r in rewards:
        store.add_reward("r-join", r)
    store.finish_attempt("r-join", 1, AttemptFinish(status="failed", failure_kind=FailureKind.TASK, exit_code=1))
    return live_server


def get(admin_client: httpx.Client, **params) -> Trajectory:
    answer = admin_client.get("/api/rollouts/r-join/trajectory", params=params)
    assert answer.status_code == 200, answer.text
    return Trajectory.model_validate(answer.json())


def test_calls_come_in_order_with_span_paths_that_end_at_the_calling_step(joined_attempt, admin_client):
    t = get(admin_client)
    assert [c.call.id for c in t.calls] == ["call-a", "call-b", "call-c"]
    assert [c.call.seq for c in t.calls] == [0, 1, 2]
    assert [c.span_path for c in t.calls] == [
        [semconv.SPAN_ROLLOUT, "planner", "step"],
        [semconv.SPAN_ROLLOUT, "coder"],
        [],
    ]
    assert [c.agent_name for c in t.calls] == ["planner", "coder", None]
    assert t.calls[0].call.prompt_token_ids == [1, 2]


def test_tool_spans_sit_between_the_calls_around_them(joined_attempt, admin_client):
    [tool] = get(admin_client).tool_spans
    assert (tool.tool_name, tool.after_call, tool.span_path) == (
        "calc",
        0,
        [semconv.SPAN_ROLLOUT, f"{semconv.OP_EXECUTE_TOOL} calc"],
    )


def test_step_rewards_attach_to_their_calls_and_the_final_reward_to_the_rollout(joined_attempt, admin_client):
    t = get(admin_client)
    assert [sorted(r.id for r in c.rewards) for c in t.calls] == [["w1"], ["w2", "w5"], []]
    assert sorted(r.id for r in t.rewards) == ["w1", "w2", "w3", "w4", "w5"]
    assert t.final_reward == 1.0


def test_status_and_failure_kind_come_from_the_attempt(joined_attempt, admin_client):
    t = get(admin_client, attempt=1)
    assert (t.attempt, t.group_id, t.state.value, t.attempt_status.value, t.failure_kind) == (
        1,
        "g1",
        "failed",
        "failed",
        FailureKind.TASK,
    )


def test_unknown_attempt_or_rollout_is_404_and_naming_them(joined_attempt, admin_client):
    answer = admin_client.get("/api/rollouts/r-join/trajectory", params={"attempt": 7})
    assert answer.status_code == 404 and "attempt 7" in answer.text
    assert admin_client.get("/api/rollouts/nope/trajectory").status_code == 404
    assert admin_client.get("/api/rollouts/r-join/trajectory", params={"attempt": 0}).status_code == 422


def test_trajectory_needs_the_admin_key(joined_attempt):
    from alight_server.http.auth import issue_attempt_token

    url = f"{joined_attempt.url}/api/rollouts/r-join/trajectory"
    assert httpx.get(url).status_code == 401
    token = issue_attempt_token(joined_attempt.app.state.token_secret, "r-join", 1, ttl_s=60)
    assert httpx.get(url, headers={"authorization": f"Bearer {token}"}).status_code == 403
