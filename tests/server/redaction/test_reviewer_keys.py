"""Reviewer keys: people who read redacted copies (as a viewer key does) and decide the review queue, nothing else.

The matrix walks every route the app serves, so a route added later is refused to a reviewer until it is named
in REVIEWER_MAY. The server is a real one on loopback with the planted rollout (planted_rollout.py) and a
flagged rollout whose evidence and diff carry planted secrets (planted_review.py).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import ValidationError

from alight.schemas import REVIEW_DECISION
from alight_server.config import ServerConfig
from alight_server.redaction import PatternRule, RedactionConfig
from alight_server.stacks.server_thread import free_port
from tests.conftest import ADMIN_KEY
from tests.server.redaction.planted import PATTERN, SECRETS, leaked
from tests.server.redaction.planted_review import plant_flagged
from tests.server.redaction.planted_rollout import ROLLOUT, RUN, plant_run

if TYPE_CHECKING:
    from tests.conftest import LiveServer

REVIEWER_KEY = "alr_reviewer-key-for-the-queue-01"
FILE_REVIEWER_KEY = "alr_reviewer-key-from-the-file-02"
VIEWER_KEY = "alv_viewer-key-that-only-reads-01"
FLAGGED = "flagged-1"
# What a reviewer key may call: the viewer's reads, the queue, and a decision. Every other route is refused.
REVIEWER_MAY = {
    ("GET", "/api/rollouts"),
    ("GET", "/api/rollouts/{rollout_id}"),
    ("GET", "/api/rollouts/{rollout_id}/events"),
    ("GET", "/api/rollouts/{rollout_id}/rewards"),
    ("GET", "/api/rollouts/{rollout_id}/trajectory"),
    ("GET", "/api/runs"),
    ("GET", "/api/runs/{run_id}"),
    ("GET", "/api/runs/{run_id}/steps"),
    ("GET", "/api/ui/rollouts"),
    ("GET", "/api/ui/rollouts/{rollout_id}/view"),
    ("GET", "/api/ui/rollouts/{rollout_id}/tokens"),
    ("GET", "/api/ui/runs/{run_id}/curves"),
    ("GET", "/api/ui/runs/{run_id}/health"),
    ("GET", "/api/reviews"),
    ("POST", "/api/rollouts/{rollout_id}/review"),
}
# Open to anyone, no key at all: nothing a reviewer key is needed for.
OPEN = {"/healthz", "/readyz", "/metrics", "/ui", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}
PATH_VALUES = {"rollout_id": ROLLOUT, "run_id": RUN, "attempt": "1", "upstream_id": "u"}


@pytest.fixture
def server_config(sqlite_url: str, tmp_path: Path) -> ServerConfig:
    key_file = tmp_path / "reviewers.txt"
    key_file.write_text(f"# the security team\n{FILE_REVIEWER_KEY}\n")
    return ServerConfig(
        admin_key=ADMIN_KEY,
        db_url=sqlite_url,
        port=free_port(),
        viewer_keys=[VIEWER_KEY],
        reviewer_keys=[REVIEWER_KEY],
        reviewer_key_file=key_file,
        redaction=RedactionConfig(patterns=[PatternRule(**PATTERN)]),
    )


@pytest.fixture
def reviewer(live_server: LiveServer) -> Iterator[httpx.Client]:
    plant_run(live_server.store)
    plant_flagged(live_server.store, FLAGGED, f"calc.py:3 reads {SECRETS['github_token']}", diff=SECRETS["jwt"])
    headers = {"Authorization": f"Bearer {REVIEWER_KEY}"}
    with httpx.Client(base_url=live_server.url, headers=headers, timeout=60) as client:
        yield client


def app_routes(app: FastAPI) -> list[tuple[str, str]]:
    """(method, path) of every route the app serves, through included routers (FastAPI keeps them nested)."""
    found: list[tuple[str, str]] = []

    def walk(routes: list[Any], prefix: str) -> None:
        for route in routes:
            if hasattr(route, "original_router"):
                walk(route.original_router.routes, prefix + (route.include_context.prefix or ""))
            elif getattr(route, "methods", None):
                found.extend((m, prefix + route.path) for m in sorted(route.methods) if m != "HEAD")

    walk(app.routes, "")
    return found


def _fill(path: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: PATH_VALUES[m.group(1)], path)


def _snapshot(live_server: LiveServer) -> tuple[Any, ...]:
    store = live_server.store
    rollouts = [store.get_rollout(rid) for rid in (ROLLOUT, FLAGGED)]
    events = [store.list_events(rid) for rid in (ROLLOUT, FLAGGED)]
    rewards = [store.list_rewards(rid) for rid in (ROLLOUT, FLAGGED)]
    return (rollouts, events, rewards, store.list_runs(), store.list_upstreams(), store.current_policy_version())


def test_every_route_the_app_serves_is_refused_to_a_reviewer_but_reads_and_reviews(
    reviewer: httpx.Client, live_server: LiveServer
) -> None:
    routes = app_routes(live_server.app)
    assert set(routes) >= REVIEWER_MAY, sorted(REVIEWER_MAY - set(routes))  # the table names real routes
    assert len(routes) > 40, routes  # the walk found the included routers
    before = _snapshot(live_server)
    for method, path in routes:
        if path in OPEN:
            continue
        response = reviewer.request(method, _fill(path), json={} if method != "GET" else None)
        if (method, path) in REVIEWER_MAY:
            assert response.status_code not in (401, 403) and response.status_code < 500, (path, response.text)
            assert leaked(response.text) == [], path
        else:
            assert response.status_code in (401, 403), (method, path, response.status_code, response.text)
    assert _snapshot(live_server) == before  # the review route answered 409 for the rollout nobody flagged


@pytest.mark.parametrize(("method", "path"), sorted(REVIEWER_MAY))
def test_a_reviewer_never_reads_a_secret_even_asking_for_the_exact_content(
    reviewer: httpx.Client, method: str, path: str
) -> None:
    for rollout in (ROLLOUT, FLAGGED):
        url = _fill(path).replace(ROLLOUT, rollout)
        response = reviewer.request(method, url, params={"reveal": "true"}, json={} if method != "GET" else None)
        assert leaked(response.text) == [], (url, response.text[:300])
        if response.status_code == 403:
            assert "reveal permission" in response.text


def test_a_reviewer_reads_the_queue_redacted_and_may_decide(reviewer: httpx.Client) -> None:
    queue = reviewer.get("/api/reviews").json()
    assert [r["rollout_id"] for r in queue["reviews"]] == [FLAGGED]
    assert queue["can_decide"] is True and queue["redacted"] is True
    (item,) = queue["reviews"]
    assert "[REDACTED:github_token]" in item["flags"][0]["evidence"] and leaked(str(item)) == []


def test_a_reviewer_decision_is_stored_under_the_keys_fingerprint_never_the_key(
    reviewer: httpx.Client, live_server: LiveServer
) -> None:
    response = reviewer.post(f"/api/rollouts/{FLAGGED}/review", json={"decision": "reject", "note": "reads a token"})
    assert response.status_code == 200, response.text
    (stored,) = live_server.store.list_events(FLAGGED, kind=REVIEW_DECISION)
    fingerprint = hashlib.sha256(REVIEWER_KEY.encode()).hexdigest()[:12]
    assert stored.payload == {"decision": "reject", "reviewer": fingerprint, "note": "reads a token"}
    assert REVIEWER_KEY not in response.text and response.json()["review"] == "rejected"


def test_a_key_in_the_reviewer_key_file_decides_as_a_reviewer(reviewer: httpx.Client, live_server: LiveServer) -> None:
    headers = {"Authorization": f"Bearer {FILE_REVIEWER_KEY}"}
    response = httpx.post(
        f"{live_server.url}/api/rollouts/{FLAGGED}/review", json={"decision": "accept"}, headers=headers
    )
    assert response.status_code == 200 and response.json()["review"] == "accepted"


def test_a_viewer_reads_the_queue_but_is_refused_a_decision_naming_the_reviewer_key(
    reviewer: httpx.Client, live_server: LiveServer
) -> None:
    viewer = {"Authorization": f"Bearer {VIEWER_KEY}"}
    queue = httpx.get(f"{live_server.url}/api/reviews", headers=viewer).json()
    assert queue["can_decide"] is False and [r["rollout_id"] for r in queue["reviews"]] == [FLAGGED]
    refused = httpx.post(
        f"{live_server.url}/api/rollouts/{FLAGGED}/review", json={"decision": "accept"}, headers=viewer
    )
    assert refused.status_code == 403 and "reviewer key" in refused.json()["error"]["message"]
    assert live_server.store.list_events(FLAGGED, kind=REVIEW_DECISION) == []


def test_a_reviewer_refused_an_admin_route_is_told_what_a_reviewer_key_may_do(reviewer: httpx.Client) -> None:
    response = reviewer.post("/api/gateway/pause")
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["type"] == "permission_error" and "a reviewer key reads what a viewer key reads" in error["message"]


def test_a_reviewer_key_that_is_also_a_viewer_key_is_refused(sqlite_url: str) -> None:
    with pytest.raises(ValidationError, match="a reviewer key is also a viewer key"):
        ServerConfig(admin_key=ADMIN_KEY, db_url=sqlite_url, viewer_keys=[VIEWER_KEY], reviewer_keys=[VIEWER_KEY])


def test_a_reviewer_key_file_holding_a_viewer_key_is_refused_naming_the_roles(sqlite_url: str, tmp_path: Path) -> None:
    key_file = tmp_path / "reviewers.txt"
    key_file.write_text(VIEWER_KEY + "\n")
    config = ServerConfig(admin_key=ADMIN_KEY, db_url=sqlite_url, viewer_keys=[VIEWER_KEY], reviewer_key_file=key_file)
    with pytest.raises(ValueError, match="a reviewer key is also a viewer key"):
        config.all_reviewer_keys()


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (["short"], "a reviewer key in reviewer_keys is 5 characters; use at least 16"),
        ([ADMIN_KEY], "a reviewer key in reviewer_keys is the admin key"),
        (["alt1.looks-like-an-attempt-token"], "starts with alt1."),
    ],
)
def test_a_weak_reviewer_key_is_refused_naming_the_setting(sqlite_url: str, keys: list[str], message: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        ServerConfig(admin_key=ADMIN_KEY, db_url=sqlite_url, reviewer_keys=keys)


def test_reviewer_keys_from_the_environment_read_as_a_comma_separated_list(sqlite_url: str) -> None:
    given = {"admin_key": ADMIN_KEY, "db_url": sqlite_url, "reviewer_keys": f"{REVIEWER_KEY}, {FILE_REVIEWER_KEY}"}
    assert ServerConfig.model_validate(given).all_reviewer_keys() == (REVIEWER_KEY, FILE_REVIEWER_KEY)
