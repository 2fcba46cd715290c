"""Property fuzz of what a hostile client can send the API, the gateway and OTLP: never a 5xx.

Hypothesis generates what the schema-driven fuzz (test_fuzz.py) does not: arbitrary header bytes
(non-ASCII ones included), deep nesting, huge numbers and wrong types in the fields each route reads.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alight.schemas import RolloutCreate, UpstreamCreate
from alight_server.http.auth import issue_attempt_token
from alight_server.http.json_depth import MAX_JSON_DEPTH
from alight_server.stacks.server_thread import ServerThread
from alight_testing.fake_upstream import create_fake_upstream
from tests.conftest import ADMIN_KEY
from tests.server.otlp.test_ingest import otlp_json

if TYPE_CHECKING:
    from tests.conftest import LiveServer

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
GATEWAY = "/gw/r1/1/v1/chat/completions"
ROUTES = [("GET", "/api/rollouts"), ("POST", "/api/rollouts/r1/events"), ("POST", "/v1/traces"), ("POST", GATEWAY)]

# Header values as h11 lets them through: visible ASCII, spaces and every byte from 0x80 up.
header_bytes = (
    st.binary(min_size=1, max_size=120)
    .map(lambda b: bytes(c for c in b if c >= 0x20 and c != 0x7F).strip())
    .filter(bool)
    .map(lambda b: b if b.startswith(b"alt1.") or len(b) % 2 else b"alt1." + b)  # half of them look like tokens
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**200), 2**200) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)


@pytest.fixture
def hostile(live_server: LiveServer) -> Any:
    """Rollout r1 with attempt 1 running on a live server whose gateway forwards to a vLLM-shaped upstream."""
    with ServerThread(create_fake_upstream(model="policy")) as upstream:
        live_server.store.add_upstream(UpstreamCreate(id="u", url=f"{upstream}/v1", model="policy"))
        live_server.store.create_rollouts([RolloutCreate(id="r1")])
        live_server.store.claim_attempts(1)
        token = issue_attempt_token(live_server.app.state.token_secret, "r1", 1, 600)
        with httpx.Client(base_url=live_server.url, timeout=30) as client:
            yield client, token


def _no_server_error(response: httpx.Response) -> None:
    sent = response.request.content[:300]
    assert response.status_code < 500, (
        f"{response.request.url} {sent!r} -> {response.status_code}: {response.text[:300]}"
    )


def _nest(depth: int) -> str:
    """JSON text nesting `depth` levels, objects and arrays in turn (text: json.dumps would recurse)."""
    opens = "".join('{"k":' if i % 2 else "[" for i in range(depth))
    return opens + "0" + "".join("}" if i % 2 else "]" for i in reversed(range(depth)))


@FUZZ
@given(token=header_bytes, route=st.sampled_from(ROUTES))
def test_any_authorization_bytes_get_401_never_500(hostile: Any, token: bytes, route: tuple[str, str]) -> None:
    client, _ = hostile
    method, path = route
    response = client.request(method, path, content=b"{}", headers={"Authorization": b"Bearer " + token})
    _no_server_error(response)
    assert response.status_code in (401, 403), response.text


@FUZZ
@given(depth=st.integers(1, 3000), route=st.sampled_from(["api", "gateway", "otlp"]))
def test_deep_nesting_past_the_limit_is_a_400_naming_it(hostile: Any, depth: int, route: str) -> None:
    client, token = hostile
    auth = {"Authorization": f"Bearer {token}"}
    deep = _nest(depth)
    if route == "api":
        body = '{"kind": "log", "payload": {"v": ' + deep + "}}"
        response = client.post(
            "/api/rollouts/r1/events", content=body, headers={**auth, "content-type": "application/json"}
        )
    elif route == "gateway":
        body = (
            '{"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "metadata": ' + deep + "}"
        )
        response = client.post(GATEWAY, content=body, headers=auth)
    else:
        export = json.dumps(otlp_json("r1")).replace(
            '"attributes": [{"key": "gen_ai',
            '"attributes": [{"key": "deep", "value": ' + _otlp_nest(depth) + '}, {"key": "gen_ai',
            1,
        )
        headers = {**auth, "content-type": "application/json"}
        response = client.post("/v1/traces", content=export, headers=headers)
    _no_server_error(response)
    # The body's own depth: the wrappers around `deep` add a few levels to it.
    if depth > MAX_JSON_DEPTH:
        assert response.status_code == 400 and f"limit of {MAX_JSON_DEPTH} levels" in response.text, response.text


def _otlp_nest(depth: int) -> str:
    """An OTLP AnyValue whose JSON nests about `depth` levels (each array value adds three)."""
    levels = max(depth // 3, 1)
    return '{"arrayValue": {"values": [' * levels + '{"intValue": "1"}' + "]}}" * levels


@FUZZ
@given(
    field=st.sampled_from(["id", "task", "timeout_s", "max_attempts", "mode", "runner", "metadata"]), value=json_values
)
def test_wrong_types_and_huge_numbers_in_a_rollout_never_give_500(hostile: Any, field: str, value: Any) -> None:
    client, _ = hostile
    response = client.post(
        "/api/rollouts",
        content=json.dumps({"rollouts": [{field: value}]}),
        headers={"Authorization": f"Bearer {ADMIN_KEY}", "content-type": "application/json"},
    )
    _no_server_error(response)


@FUZZ
@given(
    field=st.sampled_from(["model", "messages", "max_tokens", "temperature", "seed", "n", "stream", "tools", "stop"]),
    value=json_values,
)
def test_wrong_types_and_huge_numbers_at_the_gateway_never_give_500(hostile: Any, field: str, value: Any) -> None:
    client, token = hostile
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, field: value}
    response = client.post(GATEWAY, content=json.dumps(body), headers={"Authorization": f"Bearer {token}"})
    _no_server_error(response)


@FUZZ
@given(path=st.sampled_from(["value", "start", "name", "attrs"]), value=json_values)
def test_wrong_types_and_huge_numbers_in_otlp_json_never_give_500(hostile: Any, path: str, value: Any) -> None:
    client, token = hostile
    export = otlp_json("r1")
    span = export["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    if path == "value":
        span["events"][0]["attributes"][0]["value"] = {"doubleValue": value}
    elif path == "start":
        span["startTimeUnixNano"] = value
    elif path == "name":
        span["name"] = value
    else:
        span["attributes"] = value
    headers = {"Authorization": f"Bearer {token}", "content-type": "application/json"}
    _no_server_error(client.post("/v1/traces", content=json.dumps(export), headers=headers))


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"max_tokens": -1}, "max_tokens"),
        ({"model": 7}, "model"),
        ({"seed": 2**70}, "seed"),
        ({"messages": [{"content": "no role"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": None}]}, "messages[0].content"),
    ],
)
def test_the_gateway_refuses_what_every_upstream_would_with_an_openai_shaped_400(
    hostile: Any, change: dict[str, Any], param: str
) -> None:
    client, token = hostile
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, **change}
    response = client.post(GATEWAY, json=body, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", param), error


def test_the_vllm_shaped_double_refuses_out_of_vocabulary_prompt_ids() -> None:
    from alight_testing.fake_upstream import vllm_refusal

    assert vllm_refusal({"prompt": [1, 2, 40000]}, vocab_size=32000) == (
        "prompt",
        "prompt: token id out of vocabulary (size 32000)",
    )
    assert vllm_refusal({"prompt": [1, 2, 3], "max_tokens": 4}, vocab_size=32000) is None
