"""Viewer keys: people read redacted copies of rollouts, trajectories, events, runs and the dashboard, and nothing else.

A viewer key never reveals (403 naming the permission), never writes, never reaches the gateway; the admin
key still reveals. The server is a real one on loopback with the planted rollout (planted_rollout.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from pydantic import ValidationError

from alight.schemas import RolloutCreate
from alight_server.config import ServerConfig
from alight_server.redaction import PatternRule, RedactionConfig
from alight_server.stacks.server_thread import free_port
from alight_server.store.base import NotFound
from tests.conftest import ADMIN_KEY
from tests.server.redaction.planted import PATTERN, SECRETS, leaked
from tests.server.redaction.planted_rollout import ROLLOUT, RUN, plant_run

if TYPE_CHECKING:
    from tests.conftest import LiveServer

VIEWER_KEY = "alv_viewer-key-for-reviewers-0001"
FILE_VIEWER_KEY = "alv_viewer-key-from-the-file-0002"


@pytest.fixture
def server_config(sqlite_url: str, tmp_path: Path) -> ServerConfig:
    """The redaction tests' config with one viewer key in the config and another in a viewer key file."""
    key_file = tmp_path / "viewers.txt"
    key_file.write_text(f"# reviewers\n\n{FILE_VIEWER_KEY}\n")
    return ServerConfig(
        admin_key=ADMIN_KEY,
        db_url=sqlite_url,
        port=free_port(),
        viewer_keys=[VIEWER_KEY],
        viewer_key_file=key_file,
        redaction=RedactionConfig(patterns=[PatternRule(**PATTERN)]),
    )


@pytest.fixture
def viewer(live_server: LiveServer) -> httpx.Client:
    plant_run(live_server.store)
    return httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {VIEWER_KEY}"}, timeout=60)


def test_a_viewer_reads_the_trajectory_redacted(viewer: httpx.Client) -> None:
    response = viewer.get(f"/api/rollouts/{ROLLOUT}/trajectory")
    assert response.status_code == 200
    assert leaked(response.text) == [] and "[REDACTED:private_key]" in response.text
    assert json.loads(response.text)["calls"], "the viewer got an empty trajectory"


def test_a_viewer_reads_the_dashboard_json_redacted(viewer: httpx.Client) -> None:
    for path in (
        f"/api/ui/rollouts/{ROLLOUT}/view",
        f"/api/ui/rollouts/{ROLLOUT}/tokens",
        "/api/ui/rollouts",
        f"/api/ui/runs/{RUN}/curves",
        f"/api/rollouts/{ROLLOUT}/events",
        f"/api/rollouts/{ROLLOUT}/rewards",
        f"/api/runs/{RUN}",
        f"/api/runs/{RUN}/steps",
        "/api/runs",
    ):
        response = viewer.get(path)
        assert response.status_code == 200, (path, response.text)
        assert leaked(response.text) == [], path
    assert viewer.get(f"/api/ui/rollouts/{ROLLOUT}/view").json()["redacted"] is True


def test_a_viewer_reads_the_rollouts_task_redacted_where_the_admin_reads_it_as_given(
    viewer: httpx.Client, live_server: LiveServer
) -> None:
    for path in (f"/api/rollouts/{ROLLOUT}", "/api/rollouts"):
        shown = viewer.get(path)
        assert shown.status_code == 200 and leaked(shown.text) == [], path
    exact = httpx.get(f"{live_server.url}/api/rollouts/{ROLLOUT}", headers=live_server.admin_headers())
    assert leaked(exact.text), "the controller's read of the task must stay exact"


def test_a_key_in_the_viewer_key_file_reads_as_a_viewer(viewer: httpx.Client, live_server: LiveServer) -> None:
    headers = {"Authorization": f"Bearer {FILE_VIEWER_KEY}"}
    read = httpx.get(f"{live_server.url}/api/rollouts/{ROLLOUT}/trajectory", headers=headers)
    assert read.status_code == 200 and leaked(read.text) == []
    refused = httpx.get(f"{live_server.url}/api/rollouts/{ROLLOUT}/trajectory?reveal=true", headers=headers)
    assert refused.status_code == 403


@pytest.mark.parametrize(
    "path",
    [
        f"/api/rollouts/{ROLLOUT}/trajectory",
        f"/api/rollouts/{ROLLOUT}/events",
        f"/api/ui/rollouts/{ROLLOUT}/view",
        f"/api/ui/rollouts/{ROLLOUT}/tokens",
    ],
)
def test_a_viewer_is_refused_reveal_naming_the_permission(viewer: httpx.Client, path: str) -> None:
    response = viewer.get(path, params={"reveal": "true"})
    assert response.status_code == 403
    assert "reveal" in response.text and "admin key" in response.text and leaked(response.text) == []


def test_the_admin_still_reveals(viewer: httpx.Client, live_server: LiveServer) -> None:
    response = httpx.get(
        f"{live_server.url}/api/rollouts/{ROLLOUT}/trajectory",
        params={"reveal": "true"},
        headers=live_server.admin_headers(),
    )
    assert response.status_code == 200 and set(leaked(response.text)) == set(SECRETS)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/api/rollouts", {"rollouts": [{"id": "from-a-viewer"}]}),
        ("POST", f"/api/rollouts/{ROLLOUT}/events", {"kind": "note", "attempt": 1, "payload": {}}),
        ("POST", f"/api/rollouts/{ROLLOUT}/rewards", {"attempt": 1, "value": 1.0, "source": "evaluator"}),
        ("POST", f"/api/rollouts/{ROLLOUT}/cancel", None),
        ("POST", f"/api/rollouts/{ROLLOUT}/status", {"state": "cancelled"}),
        ("POST", "/api/runs", {"id": "from-a-viewer", "status": "running", "config": {}}),
        ("POST", f"/api/runs/{RUN}/steps", {"step": 9, "metrics": {"x": 1.0}}),
        ("POST", "/api/attempts/claim", {"limit": 1}),
        ("POST", "/api/rollouts/wait", {"ids": [ROLLOUT], "timeout_s": 0}),
        ("GET", "/api/upstreams", None),
        ("POST", "/api/upstreams", {"id": "u", "base_url": "http://127.0.0.1:9/v1", "model": "m"}),
        ("GET", f"/api/ui/runs/{RUN}/check", None),
    ],
)
def test_a_viewer_is_refused_every_write_and_admin_route(
    viewer: httpx.Client, live_server: LiveServer, method: str, path: str, body: object
) -> None:
    store = live_server.store
    before = (store.get_rollout(ROLLOUT), store.list_rewards(ROLLOUT), store.list_events(ROLLOUT), store.list_runs())
    response = viewer.request(method, path, json=body)
    assert response.status_code == 403, (path, response.status_code, response.text)
    assert "viewer key" in response.text
    assert (
        store.get_rollout(ROLLOUT),
        store.list_rewards(ROLLOUT),
        store.list_events(ROLLOUT),
        store.list_runs(),
    ) == before
    with pytest.raises(NotFound):
        store.get_rollout("from-a-viewer")


def test_a_viewer_never_reaches_the_gateway(viewer: httpx.Client, live_server: LiveServer) -> None:
    live_server.store.create_rollouts([RolloutCreate(id="gated")])
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    for method, path, body in (
        ("POST", "/v1/chat/completions", chat),
        ("POST", "/v1/messages", {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}),
        ("POST", "/v1/traces", None),
        ("GET", "/api/gateway/status", None),
        ("POST", "/api/gateway/pause", None),
    ):
        response = viewer.request(method, path, json=body)
        assert response.status_code in (401, 403, 404), (path, response.status_code)
        assert response.status_code != 404 or path.startswith("/api/gateway"), (path, response.text)
    assert live_server.store.list_model_calls("gated") == []


def test_a_viewer_key_equal_to_the_admin_key_is_refused_naming_the_setting(sqlite_url: str) -> None:
    with pytest.raises(ValidationError, match="viewer key in viewer_keys is the admin key"):
        ServerConfig(admin_key=ADMIN_KEY, db_url=sqlite_url, viewer_keys=[ADMIN_KEY])


def test_a_short_viewer_key_is_refused_naming_its_length(sqlite_url: str) -> None:
    with pytest.raises(ValidationError, match="is 5 characters; use at least 16"):
        ServerConfig(admin_key=ADMIN_KEY, db_url=sqlite_url, viewer_keys=["short"])


def test_alight_serve_refuses_an_unreadable_viewer_key_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.txt"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "alight",
            "serve",
            "--db",
            str(tmp_path / "a.db"),
            "--admin-key",
            ADMIN_KEY,
            "--port",
            str(free_port()),
        ],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ALIGHT_CONFIG": _config(tmp_path, missing)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and f"cannot read viewer_key_file {missing}" in result.stderr


def _config(tmp_path: Path, key_file: Path) -> str:
    path = tmp_path / "server.yaml"
    path.write_text(f"viewer_key_file: {key_file}\n")
    return str(path)


def test_viewer_keys_from_the_environment_read_as_a_comma_separated_list(sqlite_url: str) -> None:
    given = {"admin_key": ADMIN_KEY, "db_url": sqlite_url, "viewer_keys": f"{VIEWER_KEY}, {FILE_VIEWER_KEY}"}
    assert ServerConfig.model_validate(given).all_viewer_keys() == (VIEWER_KEY, FILE_VIEWER_KEY)
