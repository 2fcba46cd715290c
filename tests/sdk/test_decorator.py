"""@alight.rollout: plain function outside the controller, one traced attempt under it."""

from __future__ import annotations

import asyncio

import pytest

import alight
from alight import semconv
from alight.decorator import is_rollout

pytestmark = pytest.mark.timeout(60)


def spans_by_name(store, rollout_id: str):
    return {s.name: s for s in store.list_spans(rollout_id)}


def test_outside_the_controller_a_sync_function_runs_exactly_as_undecorated(no_alight_env):
    calls = []

    @alight.rollout
    def agent(task, *, scale=2):
        """docs stay"""
        calls.append((task, scale, alight.current()))
        return task * scale

    assert agent(5, scale=3) == 15
    assert calls == [(5, 3, None)]
    assert agent.__name__ == "agent" and agent.__doc__ == "docs stay"
    assert is_rollout(agent)
    with pytest.raises(TypeError):
        agent()  # no task is invented outside the controller


async def test_outside_the_controller_an_async_function_runs_exactly_as_undecorated(no_alight_env):
    @alight.rollout
    async def agent(task):
        await asyncio.sleep(0)
        if task == "boom":
            raise KeyError(task)
        return [task]

    assert await agent("x") == ["x"]
    with pytest.raises(KeyError):
        await agent("boom")


def test_reward_outside_a_rollout_is_a_checked_no_op(no_alight_env):
    alight.reward(1.0)
    alight.emit("nothing", x=1)
    with pytest.raises(ValueError, match="finite"):
        alight.reward(float("nan"))
    with pytest.raises(TypeError, match="number"):
        alight.reward("1.0")  # type: ignore[arg-type]


def test_under_the_controller_the_task_is_passed_and_a_returned_number_is_the_final_reward(live_server, attempt):
    seen = []

    @alight.rollout
    def agent(task):
        ctx = alight.current()
        seen.append((task, ctx.rollout_id, ctx.attempt, ctx.mode, ctx.gateway_base_url, ctx.token))
        return 0.75

    assert agent() == 0.75
    assert seen == [
        ({"n": 3}, "r-sdk", 1, "train", attempt.start.gateway_base_url, attempt.start.token),
    ]
    assert alight.current() is None
    root = spans_by_name(live_server.store, "r-sdk")[semconv.SPAN_ROLLOUT]
    assert root.parent_span_id is None
    assert root.attributes[semconv.ATTR_ROLLOUT_ID] == "r-sdk"
    assert root.status_code == 1
    [reward] = live_server.store.list_rewards("r-sdk")
    assert (reward.value, reward.final, reward.span_id, reward.attempt) == (0.75, True, root.span_id, 1)


async def test_async_entry_under_the_controller_records_nested_spans_and_step_rewards(live_server, attempt):
    from opentelemetry import trace

    @alight.rollout
    async def agent(task):
        tracer = trace.get_tracer("agent")
        with tracer.start_as_current_span("plan", attributes={semconv.GEN_AI_AGENT_NAME: "planner"}):
            await asyncio.sleep(0)
            alight.reward(0.5, name="plan_quality")
        alight.emit("checkpoint", step=1, note={"k": "v"})
        return None

    assert await agent() is None
    spans = spans_by_name(live_server.store, "r-sdk")
    assert spans["plan"].parent_span_id == spans[semconv.SPAN_ROLLOUT].span_id
    [reward] = live_server.store.list_rewards("r-sdk")
    assert (reward.name, reward.value, reward.final, reward.span_id) == (
        "plan_quality",
        0.5,
        False,
        spans["plan"].span_id,
    )
    [event] = [e for e in spans[semconv.SPAN_ROLLOUT].events if e["name"] == semconv.EVENT_EMIT]
    assert event["attributes"] == {semconv.ATTR_EVENT_NAME: "checkpoint", "step": 1, "note": "{'k': 'v'}"}


def test_an_exception_is_recorded_with_its_traceback_and_re_raised(live_server, attempt):
    @alight.rollout
    def agent(task):
        raise RuntimeError(f"tool crashed on {task['n']}")

    with pytest.raises(RuntimeError, match="tool crashed on 3"):
        agent()
    root = spans_by_name(live_server.store, "r-sdk")[semconv.SPAN_ROLLOUT]
    assert root.status_code == 2
    [event] = [e for e in root.events if e["name"] == semconv.EVENT_EXCEPTION]
    assert event["attributes"]["exception.type"] == "RuntimeError"
    assert "tool crashed on 3" in event["attributes"]["exception.stacktrace"]
    assert live_server.store.list_rewards("r-sdk") == []


def test_a_non_finite_returned_reward_fails_the_rollout(live_server, attempt):
    @alight.rollout
    def agent(task):
        return float("inf")

    with pytest.raises(ValueError, match="finite"):
        agent()
    assert live_server.store.list_rewards("r-sdk") == []


def test_explicit_arguments_win_over_the_task(live_server, attempt):
    @alight.rollout
    def agent(task=None):
        return len(task)

    assert agent("four") == 4
    [reward] = live_server.store.list_rewards("r-sdk")
    assert reward.value == 4.0


def test_a_rollout_inside_a_rollout_is_a_plain_call(live_server, attempt):
    @alight.rollout
    def inner(x):
        return x + 1

    @alight.rollout
    def outer(task):
        return float(inner(task["n"]))

    assert outer() == 4.0
    assert [s.name for s in live_server.store.list_spans("r-sdk")] == [semconv.SPAN_ROLLOUT]


def test_sys_exit_zero_inside_the_agent_is_a_success(live_server, attempt):
    @alight.rollout
    def agent(task):
        raise SystemExit(0)

    with pytest.raises(SystemExit):
        agent()
    root = spans_by_name(live_server.store, "r-sdk")[semconv.SPAN_ROLLOUT]
    assert root.status_code == 1
    assert not [e for e in root.events if e["name"] == semconv.EVENT_EXCEPTION]
