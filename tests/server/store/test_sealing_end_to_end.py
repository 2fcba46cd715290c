"""A marker an agent sends through the real gateway (a model call), in an OTLP span and in an event is nowhere in
the database's bytes (SQLite file and WAL; a pg_dump), while the trajectory and the sample builder read it back."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import httpx
import openai
import pytest
from sealing_testkit import raw_bytes

from alight import semconv
from alight.client import AlightClient
from alight.schemas import EventCreate, RolloutCreate, UpstreamCreate
from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_server.store.sql import SqlStore
from alight_server.trainer.step.samples import build_samples
from alight_testing import create_fake_upstream

ADMIN_KEY = "alk_sealing-end-to-end"


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    with ServerThread(create_fake_upstream(model="fake-policy")) as url:
        yield url + "/v1"


def _span_export(rollout_id: str, attempt: int, marker: str) -> dict[str, object]:
    """OTLP/JSON: one span with the marker in an attribute, and a reward event (so the sample builder has a row)."""
    text = {"stringValue": marker}
    span = {
        "traceId": "ab" * 16,
        "spanId": "cd" * 8,
        "name": "execute_tool",
        "kind": 1,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000001000000000",
        "attributes": [{"key": "gen_ai.tool.call.result", "value": text}],
        "events": [
            {
                "timeUnixNano": "1700000000500000000",
                "name": semconv.EVENT_REWARD,
                "attributes": [
                    {"key": semconv.ATTR_REWARD_VALUE, "value": {"doubleValue": 1.0}},
                    {"key": semconv.ATTR_REWARD_FINAL, "value": {"boolValue": True}},
                ],
            }
        ],
    }
    resource = [
        {"key": semconv.RESOURCE_ROLLOUT_ID, "value": {"stringValue": rollout_id}},
        {"key": semconv.RESOURCE_ATTEMPT, "value": {"stringValue": str(attempt)}},
    ]
    return {"resourceSpans": [{"resource": {"attributes": resource}, "scopeSpans": [{"spans": [span]}]}]}


def test_a_marker_through_the_gateway_a_span_and_an_event_is_sealed_at_rest_and_read_back_exactly(
    any_store: SqlStore, upstream_url: str
) -> None:
    marker = "e2e-marker-" + uuid.uuid4().hex
    config = ServerConfig(admin_key=ADMIN_KEY, db_url=any_store.url, port=free_port())
    with (
        ServerThread(create_app(config, store=any_store), port=config.port) as url,
        AlightClient(url, admin_key=ADMIN_KEY) as admin,
    ):
        admin.add_upstream(UpstreamCreate(id="main", url=upstream_url, model="fake-policy"))
        [rollout] = admin.create_rollouts([RolloutCreate(task={"q": "say the marker"})])
        [start] = admin.claim_attempts(limit=1, ids=[rollout.id])
        agent = openai.OpenAI(base_url=start.gateway_base_url, api_key=start.token, max_retries=0)
        agent.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": f"remember {marker}"}], max_tokens=16
        )
        exported = httpx.post(
            start.otlp_traces_endpoint,
            json=_span_export(rollout.id, start.attempt, marker),
            headers={"Authorization": f"Bearer {start.token}"},
            timeout=30,
        )
        assert exported.status_code == 200, exported.text
        with AlightClient(url, start.token) as as_agent:
            as_agent.add_event(rollout.id, EventCreate(kind="gate", payload={"evidence": f"diff: {marker}"}))
        trajectory = admin.trajectory(rollout.id, start.attempt, reveal=True)
        stored = raw_bytes(any_store.url)  # while the server runs: SQLite's WAL holds the newest pages
    [step] = trajectory.calls
    call = step.call
    assert call.request["messages"][0]["content"] == f"remember {marker}"
    assert trajectory.tool_spans[0].result == marker
    assert any_store.list_events(rollout.id)[0].payload == {"evidence": f"diff: {marker}"}
    # Nothing of it in the bytes: not the text, not the token ids that decode back to it, not the answer.
    assert len(call.prompt_token_ids) > 4 and len(call.response_token_ids) > 1
    answer = call.response["choices"][0]["message"]["content"] if call.response else ""
    assert len(answer) > 8
    for secret in (marker, json.dumps(call.prompt_token_ids, separators=(",", ":")), answer):
        assert secret.encode() not in stored, secret[:40]
    assert marker.encode() not in raw_bytes(any_store.url)
    # The sample builder gets the exact ids the gateway recorded.
    batch, report = build_samples([trajectory])
    assert batch.num_rows == 1, report
    row = batch.input_ids[0, : int(batch.attention_mask[0].sum())].tolist()
    assert row == call.prompt_token_ids + call.response_token_ids
