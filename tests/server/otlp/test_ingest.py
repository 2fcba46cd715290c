"""OTLP/HTTP ingest: the real OpenTelemetry exporter and hand-written OTLP/JSON against the live server."""

from __future__ import annotations

import gzip
import json

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from alight import semconv
from alight.schemas import RolloutCreate
from alight_server.http.auth import derive_token_secret, issue_attempt_token

pytestmark = pytest.mark.timeout(60)


def start_attempt(live_server, rollout_id: str) -> str:
    """A claimed attempt 1 of a new rollout; returns its token."""
    live_server.store.create_rollouts([RolloutCreate(id=rollout_id, task={"q": rollout_id})])
    live_server.store.claim_attempts(1, ids=[rollout_id])
    return issue_attempt_token(derive_token_secret(live_server.admin_key), rollout_id, 1, ttl_s=600)


def provider_for(url: str, token: str, rollout_id: str, attempt: int = 1, **exporter_kw) -> TracerProvider:
    resource = Resource({semconv.RESOURCE_ROLLOUT_ID: rollout_id, semconv.RESOURCE_ATTEMPT: str(attempt)})
    provider = TracerProvider(resource=resource)
    exporter = OTLPSpanExporter(
        endpoint=f"{url}/v1/traces", headers={"authorization": f"Bearer {token}"}, timeout=10, **exporter_kw
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def test_real_exporter_spans_and_rewards_arrive_with_their_rollout(live_server):
    token = start_attempt(live_server, "r-otlp")
    provider = provider_for(live_server.url, token, "r-otlp")
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span(semconv.SPAN_ROLLOUT) as root:
        with tracer.start_as_current_span("step", attributes={semconv.GEN_AI_AGENT_NAME: "planner"}) as step:
            step.add_event(semconv.EVENT_REWARD, {semconv.ATTR_REWARD_VALUE: 0.25, semconv.ATTR_REWARD_NAME: "fmt"})
        root.add_event(semconv.EVENT_REWARD, {semconv.ATTR_REWARD_VALUE: 1.0, semconv.ATTR_REWARD_FINAL: True})
    provider.shutdown()

    spans = {s.name: s for s in live_server.store.list_spans("r-otlp")}
    assert set(spans) == {semconv.SPAN_ROLLOUT, "step"}
    assert spans["step"].parent_span_id == spans[semconv.SPAN_ROLLOUT].span_id
    assert spans["step"].attributes[semconv.GEN_AI_AGENT_NAME] == "planner"
    assert all(s.rollout_id == "r-otlp" and s.attempt == 1 for s in spans.values())
    rewards = sorted(live_server.store.list_rewards("r-otlp"), key=lambda r: r.value)
    assert [(r.value, r.name, r.final, r.span_id) for r in rewards] == [
        (0.25, "fmt", False, spans["step"].span_id),
        (1.0, None, True, spans[semconv.SPAN_ROLLOUT].span_id),
    ]


def test_gzip_protobuf_export_is_accepted(live_server):
    token = start_attempt(live_server, "r-gz")
    provider = provider_for(live_server.url, token, "r-gz", compression=Compression.Gzip)
    with provider.get_tracer("test").start_as_current_span("zipped"):
        pass
    provider.shutdown()
    assert [s.name for s in live_server.store.list_spans("r-gz")] == ["zipped"]


def otlp_json(rollout_id: str, value: object = 0.5, trace_id: str = "ab" * 16, span_id: str = "cd" * 8) -> dict:
    """An OTLP/JSON export as the spec writes it: hex ids, camelCase, string nanos."""
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [
                        {"key": semconv.RESOURCE_ROLLOUT_ID, "value": {"stringValue": rollout_id}},
                        {"key": semconv.RESOURCE_ATTEMPT, "value": {"stringValue": "1"}},
                    ]
                },
                "scopeSpans": [
                    {
                        "scope": {"name": "hand"},
                        "spans": [
                            {
                                "traceId": trace_id,
                                "spanId": span_id,
                                "name": "tool",
                                "kind": 1,
                                "startTimeUnixNano": "1700000000000000000",
                                "endTimeUnixNano": "1700000001000000000",
                                "attributes": [{"key": semconv.GEN_AI_TOOL_NAME, "value": {"stringValue": "calc"}}],
                                "events": [
                                    {
                                        "timeUnixNano": "1700000000500000000",
                                        "name": semconv.EVENT_REWARD,
                                        "attributes": [
                                            {"key": semconv.ATTR_REWARD_VALUE, "value": {"doubleValue": value}},
                                        ],
                                    }
                                ],
                            }
                        ],
                    }
                ],
            }
        ]
    }


def post(live_server, token: str, body: bytes, content_type: str = "application/json", **headers: str):
    return httpx.post(
        f"{live_server.url}/v1/traces",
        content=body,
        headers={"authorization": f"Bearer {token}", "content-type": content_type, **headers},
        timeout=10,
    )


def test_json_export_is_stored_and_answered_in_json(live_server):
    token = start_attempt(live_server, "r-json")
    answer = post(live_server, token, json.dumps(otlp_json("r-json")).encode())
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    [span] = live_server.store.list_spans("r-json")
    assert (span.trace_id, span.span_id, span.name) == ("ab" * 16, "cd" * 8, "tool")
    assert span.start_time_ns == 1700000000000000000
    assert span.attributes == {semconv.GEN_AI_TOOL_NAME: "calc"}
    [reward] = live_server.store.list_rewards("r-json")
    assert (reward.value, reward.span_id) == (0.5, "cd" * 8)


def test_same_export_twice_stores_one_span_and_one_reward(live_server):
    token = start_attempt(live_server, "r-twice")
    body = json.dumps(otlp_json("r-twice")).encode()
    assert post(live_server, token, body).status_code == 200
    assert post(live_server, token, gzip.compress(body), **{"content-encoding": "gzip"}).status_code == 200
    assert len(live_server.store.list_spans("r-twice")) == 1
    assert len(live_server.store.list_rewards("r-twice")) == 1


def test_protobuf_answer_is_an_export_trace_service_response(live_server):
    token = start_attempt(live_server, "r-pb")
    answer = post(live_server, token, b"", content_type="application/x-protobuf")
    assert answer.status_code == 200
    ExportTraceServiceResponse().ParseFromString(answer.content)


def test_spans_for_another_rollout_are_forbidden_and_not_stored(live_server):
    token = start_attempt(live_server, "r-mine")
    start_attempt(live_server, "r-other")
    answer = post(live_server, token, json.dumps(otlp_json("r-other")).encode())
    assert answer.status_code == 403
    assert "r-other" in answer.text
    assert live_server.store.list_spans("r-other") == []
    assert live_server.store.list_spans("r-mine") == []


def test_real_exporter_with_a_wrong_rollout_token_is_refused(live_server):
    token = start_attempt(live_server, "r-a")
    start_attempt(live_server, "r-b")
    provider = provider_for(live_server.url, token, "r-b")
    with provider.get_tracer("test").start_as_current_span("sneaky"):
        pass
    provider.shutdown()
    assert live_server.store.list_spans("r-b") == []


def test_missing_or_forged_token_is_unauthorized(live_server):
    start_attempt(live_server, "r-auth")
    body = json.dumps(otlp_json("r-auth")).encode()
    assert httpx.post(f"{live_server.url}/v1/traces", content=body).status_code == 401
    assert post(live_server, "alt1.forged.sig", body).status_code == 401
    assert live_server.store.list_spans("r-auth") == []


@pytest.mark.parametrize(
    ("body", "content_type", "extra"),
    [
        (b"\xff\x00not protobuf", "application/x-protobuf", {}),
        (b"{not json", "application/json", {}),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}', "application/json", {}),
        (b"plain text", "application/x-protobuf", {"content-encoding": "gzip"}),
    ],
    ids=["protobuf", "json", "hex-id", "gzip"],
)
def test_malformed_body_is_400_and_nothing_is_stored(live_server, body, content_type, extra):
    token = start_attempt(live_server, "r-bad")
    answer = post(live_server, token, body, content_type=content_type, **extra)
    assert answer.status_code == 400, answer.text
    assert live_server.store.list_spans("r-bad") == []


def test_unknown_content_type_is_415(live_server):
    token = start_attempt(live_server, "r-ct")
    assert post(live_server, token, b"x", content_type="text/plain").status_code == 415


def test_too_large_body_is_413(live_server):
    token = start_attempt(live_server, "r-big")
    big = json.dumps(otlp_json("r-big")).encode() + b" " * (live_server.config.max_body_bytes + 1)
    assert post(live_server, token, big).status_code == 413
    bomb = gzip.compress(b" " * (live_server.config.max_body_bytes + 10))
    assert post(live_server, token, bomb, **{"content-encoding": "gzip"}).status_code == 413
    assert live_server.store.list_spans("r-big") == []


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", {"stringValue": "high"}])
def test_non_finite_reward_is_400_and_nothing_is_stored(live_server, value):
    token = start_attempt(live_server, "r-nan")
    payload = otlp_json("r-nan")
    attr = payload["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["events"][0]["attributes"][0]
    attr["value"] = value if isinstance(value, dict) else {"doubleValue": value}
    answer = post(live_server, token, json.dumps(payload).encode())
    assert answer.status_code == 400, answer.text
    assert semconv.ATTR_REWARD_VALUE in answer.text
    assert live_server.store.list_spans("r-nan") == []
    assert live_server.store.list_rewards("r-nan") == []
