"""Who may call what: admin key vs attempt token vs nothing vs expired vs another rollout's token."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from fastapi import FastAPI

from alight_server.http.auth import issue_attempt_token
from alight_server.http.deps import AttemptDep, AttemptTokenDep, CallerDep
from alight_server.stacks.server_thread import ServerThread

if TYPE_CHECKING:
    from tests.conftest import LiveServer
    from tests.server.api.conftest import Claim, Create

# Every admin route, with a body that would be valid for an admin.
ADMIN_ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/api/rollouts", {"rollouts": [{}]}),
    ("GET", "/api/rollouts", None),
    ("GET", "/api/rollouts/r1", None),
    ("POST", "/api/rollouts/r1/status", {"state": "running"}),
    ("POST", "/api/rollouts/r1/cancel", None),
    ("GET", "/api/rollouts/r1/events", None),
    ("GET", "/api/rollouts/r1/rewards", None),
    ("POST", "/api/rollouts/wait", {"ids": ["r1"], "timeout_s": 0}),
    ("POST", "/api/attempts/claim", {"limit": 1}),
    ("POST", "/api/rollouts/r1/attempts/1/handle", {"runner_handle": "x"}),
    ("POST", "/api/rollouts/r1/attempts/1/finish", {"status": "succeeded"}),
    ("POST", "/api/upstreams", {"url": "http://u/v1"}),
    ("GET", "/api/upstreams", None),
    ("DELETE", "/api/upstreams/u", None),
    ("GET", "/api/policy", None),
    ("POST", "/api/policy", {}),
]
AGENT_ROUTES: list[tuple[str, dict[str, Any]]] = [
    ("/api/rollouts/r1/events", {"kind": "log", "payload": {"line": "hi"}}),
    ("/api/rollouts/r1/rewards", {"attempt": 1, "value": 1.0}),
]


# One plain client: building one per request (TLS context and all) costs more than the request.
_http = httpx.Client(timeout=30)


def _send(url: str, method: str, path: str, body: dict[str, Any] | None, token: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return _http.request(method, url + path, json=body, headers=headers)


def test_admin_routes_refuse_everyone_but_the_admin(live_server: LiveServer, running: dict[str, Any]) -> None:
    for method, path, body in ADMIN_ROUTES:
        none = _send(live_server.url, method, path, body, None)
        assert none.status_code == 401 and none.headers["www-authenticate"] == "Bearer", path
        assert "missing credentials" in none.json()["error"]["message"]
        wrong = _send(live_server.url, method, path, body, "alk_not-the-key")
        assert wrong.status_code == 401 and "admin key does not match" in wrong.json()["error"]["message"], path
        agent = _send(live_server.url, method, path, body, running["token"])
        assert agent.status_code == 403 and agent.json()["error"]["type"] == "permission_error", path
        admin = _send(live_server.url, method, path, body, live_server.admin_key)
        assert admin.status_code not in (401, 403) and admin.status_code < 500, (path, admin.text)


@pytest.mark.parametrize(("path", "body"), AGENT_ROUTES)
def test_an_agent_may_write_to_its_own_attempt(
    live_server: LiveServer, running: dict[str, Any], path: str, body: dict[str, Any]
) -> None:
    response = _send(live_server.url, "POST", path, body, running["token"])
    assert response.status_code == 200, response.text
    assert response.json()["attempt"] == 1  # an event without an attempt gets the token's


@pytest.mark.parametrize(("path", "body"), AGENT_ROUTES)
def test_an_agent_may_not_write_to_another_rollout_or_attempt(
    live_server: LiveServer, create: Create, claim: Claim, path: str, body: dict[str, Any]
) -> None:
    create({"id": "r1"}, {"id": "r2"})
    claim("r1")
    other = claim("r2")["token"]
    response = _send(live_server.url, "POST", path, body, other)
    assert response.status_code == 403
    assert "for rollout 'r2' attempt 1, not rollout 'r1'" in response.json()["error"]["message"]
    mine = claim_token(live_server, "r1", attempt=1)
    wrong_attempt = _send(live_server.url, "POST", path, {**body, "attempt": 2}, mine)
    assert wrong_attempt.status_code == 403


def claim_token(live_server: LiveServer, rollout_id: str, attempt: int, ttl_s: float = 60) -> str:
    return issue_attempt_token(live_server.app.state.token_secret, rollout_id, attempt, ttl_s)


def test_expired_and_forged_tokens_are_refused(live_server: LiveServer, running: dict[str, Any]) -> None:
    path, body = AGENT_ROUTES[0]
    expired = issue_attempt_token(live_server.app.state.token_secret, "r1", 1, 1, now=time.time() - 10)
    response = _send(live_server.url, "POST", path, body, expired)
    assert response.status_code == 401 and "expired" in response.json()["error"]["message"]
    forged = issue_attempt_token(b"another server's secret", "r1", 1, 60)
    response = _send(live_server.url, "POST", path, body, forged)
    assert response.status_code == 401 and "signature" in response.json()["error"]["message"]
    garbage = _send(live_server.url, "POST", path, body, "alt1.garbage")
    assert garbage.status_code == 401


def test_attempt_dependencies_check_the_path_and_the_token_kind(live_server: LiveServer) -> None:
    app = FastAPI()
    app.state.token_secret = live_server.app.state.token_secret
    app.state.config = live_server.config
    app.state.store = live_server.store

    @app.get("/gw/{rollout_id}/{attempt}/v1/models")
    def scoped(claims: AttemptDep) -> dict[str, Any]:
        return {"rollout": claims.rollout_id, "attempt": claims.attempt}

    @app.get("/v1/models")
    def unscoped(claims: AttemptTokenDep) -> dict[str, Any]:
        return {"rollout": claims.rollout_id}

    @app.get("/whoami")
    def whoami(caller: CallerDep) -> dict[str, Any]:
        return {"admin": caller.admin}

    token = claim_token(live_server, "r1", 1)
    with ServerThread(app) as url:
        assert _send(url, "GET", "/gw/r1/1/v1/models", None, token).json() == {"rollout": "r1", "attempt": 1}
        assert _send(url, "GET", "/gw/r1/2/v1/models", None, token).status_code == 403
        assert _send(url, "GET", "/gw/r2/1/v1/models", None, token).status_code == 403
        assert _send(url, "GET", "/v1/models", None, token).json() == {"rollout": "r1"}
        assert _send(url, "GET", "/v1/models", None, live_server.admin_key).status_code == 401
        anthropic_style = _http.get(f"{url}/v1/models", headers={"x-api-key": token})
        assert anthropic_style.status_code == 200
        assert _send(url, "GET", "/whoami", None, live_server.admin_key).json() == {"admin": True}
