"""The calling agent travels as X-Alight-Agent: the propagator alight adds to the global one during a rollout."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import context as otel_context
from opentelemetry import propagate

import alight
from alight import agent_header
from alight.semconv import HEADER_AGENT


@pytest.fixture
def installed() -> Iterator[None]:
    agent_header.install()
    yield
    agent_header.uninstall()


def injected() -> dict[str, str]:
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def test_a_call_inside_calling_agent_carries_the_agents_name(installed) -> None:
    with alight.calling_agent("planner"):
        assert injected()[HEADER_AGENT] == "planner"
    assert HEADER_AGENT not in injected()


def test_the_innermost_agent_wins(installed) -> None:
    with alight.calling_agent("triage"), alight.calling_agent("math"):
        assert injected()[HEADER_AGENT] == "math"


def test_a_name_from_a_context_reaches_the_header(installed) -> None:
    token = otel_context.attach(agent_header.with_agent("solver"))
    try:
        assert injected()[HEADER_AGENT] == "solver"
    finally:
        otel_context.detach(token)


def test_a_non_ascii_or_multiline_name_travels_percent_encoded(installed) -> None:
    with alight.calling_agent("Plän\nner 100%"):
        assert injected()[HEADER_AGENT] == "Pl%C3%A4n%0Aner 100%25"


def test_the_apps_propagators_keep_working_beside_it(installed) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("call"), alight.calling_agent("planner"):
        carrier = injected()
    assert carrier[HEADER_AGENT] == "planner" and carrier["traceparent"].count("-") == 3
    assert not trace.get_current_span().get_span_context().is_valid


def test_uninstall_puts_back_the_propagator_it_replaced_and_install_twice_is_one() -> None:
    before = propagate.get_global_textmap()
    agent_header.install()
    ours = propagate.get_global_textmap()
    agent_header.install()
    assert propagate.get_global_textmap() is ours is not before
    agent_header.uninstall()
    assert propagate.get_global_textmap() is before
    with alight.calling_agent("planner"):
        assert HEADER_AGENT not in injected()


def test_a_rollout_holding_http_adds_the_header_and_its_end_removes_it() -> None:
    from alight import telemetry

    telemetry.hold_http()
    try:
        with alight.calling_agent("planner"):
            assert injected()[HEADER_AGENT] == "planner"
    finally:
        telemetry.release_http()
    with alight.calling_agent("planner"):
        assert HEADER_AGENT not in injected()
