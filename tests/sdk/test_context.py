"""alight.current/reward/emit from threads and asyncio tasks; cooperation with the app's tracing; traceparent."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import httpx2
import pytest
from fastapi import FastAPI, Request
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import alight
from alight import semconv
from alight_server.stacks.server_thread import ServerThread

pytestmark = pytest.mark.timeout(60)


def by_name(store, rollout_id="r-sdk"):
    return {s.name: s for s in store.list_spans(rollout_id)}


def test_a_plain_thread_sees_the_rollout_and_its_reward_lands_on_the_root_span(live_server, attempt):
    seen = []

    def worker():
        seen.append(alight.current().rollout_id)
        alight.reward(0.2, name="from_thread")

    @alight.rollout
    def agent(task):
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()

    agent()
    assert seen == ["r-sdk"]
    [reward] = live_server.store.list_rewards("r-sdk")
    assert (reward.name, reward.span_id) == ("from_thread", by_name(live_server.store)[semconv.SPAN_ROLLOUT].span_id)


def test_a_pool_thread_with_copied_context_rewards_its_own_span(live_server, attempt):
    @alight.rollout
    def agent(task):
        with trace.get_tracer("agent").start_as_current_span("tool-batch"), ThreadPoolExecutor(2) as pool:
            ctx = contextvars.copy_context()
            pool.submit(ctx.run, alight.reward, 0.3, "pooled").result()

    agent()
    [reward] = live_server.store.list_rewards("r-sdk")
    assert reward.span_id == by_name(live_server.store)["tool-batch"].span_id


async def test_concurrent_asyncio_tasks_reward_their_own_spans(live_server, attempt):
    async def step(i: int) -> None:
        with trace.get_tracer("agent").start_as_current_span(f"step-{i}"):
            await asyncio.sleep(0.01 * (3 - i))  # finish out of order
            assert alight.current().rollout_id == "r-sdk"
            alight.reward(float(i), name=f"step-{i}")

    @alight.rollout
    async def agent(task):
        await asyncio.gather(*(step(i) for i in range(3)))

    await agent()
    spans = by_name(live_server.store)
    rewards = {r.name: r.span_id for r in live_server.store.list_rewards("r-sdk")}
    assert rewards == {f"step-{i}": spans[f"step-{i}"].span_id for i in range(3)}
    assert {spans[f"step-{i}"].parent_span_id for i in range(3)} == {spans[semconv.SPAN_ROLLOUT].span_id}


def test_an_app_configured_provider_keeps_its_exporter_and_the_server_gets_the_spans(live_server, attempt):
    mine = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "user-app"}))
    provider.add_span_processor(SimpleSpanProcessor(mine))
    trace.set_tracer_provider(provider)

    @alight.rollout
    def agent(task):
        with trace.get_tracer("agent").start_as_current_span("user-step"):
            alight.reward(1.0, final=True)

    agent()
    assert trace.get_tracer_provider() is provider  # never replaced
    # (the in-process test server's own request spans show up there too)
    assert {semconv.SPAN_ROLLOUT, "user-step"} <= {s.name for s in mine.get_finished_spans()}
    assert set(by_name(live_server.store)) == {semconv.SPAN_ROLLOUT, "user-step"}
    [reward] = live_server.store.list_rewards("r-sdk")
    assert reward.final and reward.span_id == by_name(live_server.store)["user-step"].span_id


@pytest.fixture
def header_echo():
    """A loopback HTTP server that remembers each request's traceparent header."""
    seen: list[str | None] = []
    app = FastAPI()

    @app.post("/echo")
    async def echo(request: Request) -> dict[str, bool]:
        seen.append(request.headers.get("traceparent"))
        return {"ok": True}

    with ServerThread(app) as url:
        yield url, seen


def test_httpx_and_httpx2_requests_carry_the_calling_span_in_traceparent(live_server, attempt, header_echo):
    url, seen = header_echo
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    # other tests in this process may have switched httpx instrumentation on for good
    already_on = HTTPXClientInstrumentor().is_instrumented_by_opentelemetry

    @alight.rollout
    async def agent(task):
        with trace.get_tracer("agent").start_as_current_span("llm-step"):
            httpx.post(f"{url}/echo")  # noqa: ASYNC210  # the sync client, on purpose
            async with httpx2.AsyncClient() as client:  # what the OpenAI client uses
                await client.post(f"{url}/echo")

    asyncio.run(agent())
    httpx.post(f"{url}/echo")  # after the rollout: instrumentation is off again
    spans = {s.span_id: s for s in live_server.store.list_spans("r-sdk")}
    step = next(s for s in spans.values() if s.name == "llm-step")
    assert len(seen) == 3
    assert already_on or seen[2] is None  # alight switched off what it switched on
    for header in seen[:2]:
        _, trace_id, span_id, _ = header.split("-")
        assert trace_id == step.trace_id
        # the header names the HTTP client span, a child of the step that made the call
        assert spans[span_id].parent_span_id == step.span_id


def test_a_reward_inside_a_span_of_another_trace_lands_on_the_root(live_server, attempt):
    from opentelemetry.context import Context

    @alight.rollout
    def agent(task):
        # a span that started its own trace (not exported with the rollout)
        with trace.get_tracer("other").start_as_current_span("detached", context=Context()):
            alight.reward(0.4, name="detached")

    agent()
    [reward] = live_server.store.list_rewards("r-sdk")
    assert reward.span_id == by_name(live_server.store)[semconv.SPAN_ROLLOUT].span_id
    assert "detached" not in by_name(live_server.store)
