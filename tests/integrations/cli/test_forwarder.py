"""The forwarder on a real Unix socket in front of a real HTTP server standing in for the attempt's gateway.

Only this attempt's model calls and its environment's MCP endpoint (POST /v1/mcp) pass, with the attempt token
put on by the forwarder; every other target (the rollout API, another attempt, /admin, OTLP, spellings that try
to reach them) is answered by the forwarder itself and the gateway sees nothing.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse

from alight_sandbox.guards.forwarder import Forwarder
from alight_server.stacks.server_thread import ServerThread

TOKEN = "alt1.attempt-token-for-r1"
ATTEMPT = "/gw/r1/1/v1"


@dataclass
class Gateway:
    seen: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)  # method, target, headers, body
    release: threading.Event = field(default_factory=threading.Event)


def gateway_app(gateway: Gateway) -> FastAPI:
    app = FastAPI()

    @app.post(f"{ATTEMPT}/chat/completions")
    async def stream(request: Request) -> StreamingResponse:
        gateway.seen.append(("POST", request.url.path, dict(request.headers), await request.body()))

        cut = (await request.body()) == b'{"cut":true}'

        async def events() -> AsyncIterator[bytes]:
            yield b"data: first\n\n"
            if cut:
                raise RuntimeError("the gateway dies mid-stream")
            await asyncio.to_thread(gateway.release.wait, 30)  # the client reads `first` before this is set
            yield b"data: second\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.api_route("/{path:path}", methods=["GET", "POST", "PUT", "DELETE"])
    async def anything(request: Request, path: str) -> Response:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        gateway.seen.append((request.method, target, dict(request.headers), await request.body()))
        return Response(b'{"ok": true}', media_type="application/json")

    return app


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[str, Gateway]]:
    recorded = Gateway()
    with ServerThread(gateway_app(recorded)) as url:
        yield url, recorded


@pytest.fixture
def forwarder(gateway: tuple[str, Gateway], tmp_path: Path) -> Iterator[tuple[Path, Gateway]]:
    url, recorded = gateway
    recorded.seen.clear()
    recorded.release = threading.Event()
    path = tmp_path / "gw.sock"
    with Forwarder(path, url + ATTEMPT, TOKEN, max_head_bytes=8192, max_body_bytes=4096):
        yield path, recorded


def raw(path: Path, request: bytes) -> bytes:
    """Send bytes on the socket and read until the forwarder closes it (every refusal closes)."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        sock.sendall(request)
        chunks = []
        while data := sock.recv(65536):
            chunks.append(data)
    return b"".join(chunks)


def client(path: Path) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(uds=str(path)), base_url="http://sandbox")


def test_a_model_call_reaches_the_attempts_gateway_with_the_attempt_token_and_not_the_clients_key(forwarder):
    path, gateway = forwarder
    with client(path) as http:
        answer = http.post(
            "/v1/messages?beta=true",
            json={"model": "policy"},
            headers={"x-api-key": "placeholder", "authorization": "Bearer placeholder", "anthropic-beta": "x"},
        )
    assert answer.status_code == 200 and answer.json() == {"ok": True}
    [(method, target, headers, body)] = gateway.seen
    assert (method, target, body) == ("POST", f"{ATTEMPT}/messages?beta=true", b'{"model":"policy"}')
    assert headers["authorization"] == f"Bearer {TOKEN}" and "x-api-key" not in headers
    assert headers["anthropic-beta"] == "x"


def test_headers_outside_the_allowlist_never_reach_the_gateway(forwarder):
    path, gateway = forwarder
    smuggled = {"cookie": "s=1", "proxy-authorization": "Basic eA==", "api-key": "k", "x-goog-api-key": "k",
                "x-alight-admin-key": "k", "forwarded": "for=evil", "x-forwarded-host": "evil"}  # fmt: skip
    with client(path) as http:
        assert http.post("/v1/responses", json={}, headers=smuggled).status_code == 200
    [(_, _, headers, _)] = gateway.seen
    assert not set(smuggled) & set(headers)
    assert headers["authorization"] == f"Bearer {TOKEN}"


def test_the_environments_mcp_endpoint_reaches_the_attempts_own_gateway_with_the_attempt_token(forwarder):
    path, gateway = forwarder
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    with client(path) as http:
        answer = http.post("/v1/mcp", json=message, headers={"authorization": "Bearer placeholder",
                                                             "mcp-protocol-version": "2025-06-18"})  # fmt: skip
    assert answer.status_code == 200
    [(method, target, headers, body)] = gateway.seen
    assert (method, target) == ("POST", f"{ATTEMPT}/mcp") and b'"tools/list"' in body
    assert headers["authorization"] == f"Bearer {TOKEN}" and headers["mcp-protocol-version"] == "2025-06-18"


@pytest.mark.parametrize("method", [b"GET", b"DELETE", b"PUT"])
def test_the_mcp_endpoint_answers_other_methods_405_as_its_stateless_server_would(forwarder, method):
    path, gateway = forwarder
    answer = raw(path, method + b" /v1/mcp HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 405 ") and b"\r\nallow: POST\r\n" in answer
    assert gateway.seen == []


def test_the_callers_agent_and_role_reach_the_gateway_for_policy_routing(forwarder):
    path, gateway = forwarder
    with client(path) as http:
        http.post("/v1/responses", json={}, headers={"x-alight-agent": "Triage", "x-alight-role": "judge"})
    [(_, _, headers, _)] = gateway.seen
    assert (headers["x-alight-agent"], headers["x-alight-role"]) == ("Triage", "judge")


def test_a_streamed_answer_passes_through_as_it_is_produced(forwarder):
    path, gateway = forwarder
    with client(path) as http, http.stream("POST", "/v1/chat/completions", json={"stream": True}) as answer:
        lines = answer.iter_lines()
        assert next(lines) == "data: first"  # arrived while the gateway still holds the second event
        gateway.release.set()
        assert [line for line in lines if line] == ["data: second"]


def test_a_stream_the_gateway_cuts_is_cut_for_the_client_and_the_next_call_is_served(forwarder):
    path, _ = forwarder
    with client(path) as http:
        with (
            pytest.raises(httpx.RemoteProtocolError),
            http.stream("POST", "/v1/chat/completions", json={"cut": True}) as a,
        ):
            a.read()
        assert http.get("/v1/models").status_code == 200


def test_one_connection_carries_several_model_calls(forwarder):
    path, gateway = forwarder
    with client(path) as http:
        for _ in range(3):
            assert http.get("/v1/models").status_code == 200
    assert [target for _, target, _, _ in gateway.seen] == [f"{ATTEMPT}/models"] * 3


@pytest.mark.parametrize(
    "request_line",
    [
        b"GET /api/rollouts HTTP/1.1",  # the rollout API
        b"POST /api/rollouts/r1/rewards HTTP/1.1",
        b"POST /api/rollouts/r1/events HTTP/1.1",
        b"POST /gw/r2/1/v1/messages HTTP/1.1",  # another attempt
        b"POST /gw/r1/1/v1/messages HTTP/1.1",  # this attempt, by its gateway path: only /v1/... is served
        b"GET /admin/weights HTTP/1.1",
        b"POST /v1/traces HTTP/1.1",  # OTLP
        b"POST /v1/messages/../../api/rollouts HTTP/1.1",
        b"POST /v1/../api/rollouts HTTP/1.1",
        b"POST /v1%2Fmessages HTTP/1.1",
        b"POST /v1/messages%2F..%2F..%2Fapi HTTP/1.1",
        b"POST //v1/messages HTTP/1.1",
        b"POST /v1//messages HTTP/1.1",
        b"POST /V1/MESSAGES HTTP/1.1",
        b"POST /v1/messages/ HTTP/1.1",
        b"POST /v1/messages;x HTTP/1.1",
        b"GET /v1/messages HTTP/1.1",  # an allowed path with another method
        b"DELETE /v1/models HTTP/1.1",
        b"POST /v1/messages/count_tokens HTTP/1.1",
        b"POST /gw/r2/1/v1/mcp HTTP/1.1",  # another attempt's environment
        b"POST /gw/r1/1/v1/mcp HTTP/1.1",  # this attempt's, by its gateway path
        b"POST /v1/mcp/ HTTP/1.1",
        b"POST /v1//mcp HTTP/1.1",
        b"POST //v1/mcp HTTP/1.1",
        b"POST /V1/MCP HTTP/1.1",
        b"POST /v1/mcp/../../api/rollouts HTTP/1.1",
        b"POST /v1/mcp%2F..%2F..%2Fapi HTTP/1.1",
        b"POST /v1/%6dcp HTTP/1.1",
        b"POST /v1/mcp;x HTTP/1.1",
    ],
)
def test_every_target_but_the_attempts_own_calls_is_refused(forwarder, request_line):
    path, gateway = forwarder
    answer = raw(path, request_line + b"\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
    assert answer.startswith(b"HTTP/1.1 403 "), answer[:200]
    assert gateway.seen == []


@pytest.mark.parametrize(
    "request_line",
    [
        b"POST http://127.0.0.1:8000/api/rollouts HTTP/1.1",  # absolute-form
        b"POST http://sandbox/v1/messages HTTP/1.1",  # absolute-form of an allowed path
        b"OPTIONS * HTTP/1.1",  # asterisk-form
        b"CONNECT 127.0.0.1:8000 HTTP/1.1",  # authority-form: a tunnel
        b"POST /v1/messages?to=/api/rollouts HTTP/1.1",  # a query that is more than key=value pairs
        b"POST /v1/messages?x=%2e%2e HTTP/1.1",
        b"POST /v1/mcp?rollout=r2 HTTP/1.1",  # the MCP endpoint takes no query at all
        b"POST http://sandbox/v1/mcp HTTP/1.1",
    ],
)
def test_targets_in_other_forms_are_malformed_requests(forwarder, request_line):
    path, gateway = forwarder
    answer = raw(path, request_line + b"\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert gateway.seen == []


def test_an_oversized_request_head_is_refused(forwarder):
    path, gateway = forwarder
    answer = raw(path, b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 20000 + b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 431 ")
    assert gateway.seen == []


def test_an_oversized_body_is_refused(forwarder):
    path, gateway = forwarder
    answer = raw(path, b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n" + b"a" * 5000)
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert gateway.seen == []


def test_a_request_smuggled_behind_an_allowed_one_is_refused(forwarder):
    path, gateway = forwarder
    allowed = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
    smuggled = b"POST /api/rollouts/r1/rewards HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
    answer = raw(path, allowed + smuggled)
    assert answer.startswith(b"HTTP/1.1 200 ") and b"HTTP/1.1 403 " in answer
    assert [target for _, target, _, _ in gateway.seen] == [f"{ATTEMPT}/models"]


def test_a_request_behind_a_body_framed_two_ways_is_read_as_a_request_and_refused(forwarder):
    path, gateway = forwarder
    framed = (
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    )
    hidden = b"POST /api/rollouts/r1/rewards HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
    answer = raw(path, framed + hidden)
    assert b"HTTP/1.1 403 " in answer
    assert [target for _, target, _, _ in gateway.seen] == [f"{ATTEMPT}/completions"]


def test_conflicting_content_lengths_are_a_malformed_request(forwarder):
    path, gateway = forwarder
    answer = raw(path, b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}")
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert gateway.seen == []


def test_a_client_waiting_for_100_continue_is_asked_for_its_body(forwarder):
    path, gateway = forwarder
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 100 ")
        sock.sendall(b"{}")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
    assert [body for _, _, _, body in gateway.seen] == [b"{}"]


def test_an_unreachable_gateway_is_a_502_from_the_forwarder(tmp_path):
    with Forwarder(tmp_path / "gw.sock", "http://127.0.0.1:9/gw/r1/1/v1", TOKEN), client(tmp_path / "gw.sock") as http:
        answer = http.get("/v1/models")
    assert answer.status_code == 502 and "did not answer" in answer.json()["error"]["message"]
