"""The dashboard's JSON routes and page without a browser: auth, bad input, what the page itself holds."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import httpx
import pytest

if TYPE_CHECKING:
    from tests.conftest import LiveServer


@pytest.fixture
def attempt_token(admin_client: httpx.Client) -> str:
    """The attempt token of rollout r1's first attempt."""
    admin_client.post("/api/rollouts", json={"rollouts": [{"id": "r1"}]}).raise_for_status()
    return admin_client.post("/api/attempts/claim", json={"limit": 1, "ids": ["r1"]}).json()["attempts"][0]["token"]


UI_ROUTES = [
    "/api/ui/rollouts",
    "/api/ui/rollouts/r1/view",
    "/api/ui/rollouts/r1/tokens",
    "/api/ui/runs/x/curves",
    "/api/ui/runs/x/health",
]


@pytest.mark.parametrize("path", UI_ROUTES)
def test_ui_routes_need_the_admin_key(live_server: LiveServer, attempt_token: str, path: str) -> None:
    assert httpx.get(live_server.url + path).status_code == 401
    token = {"Authorization": f"Bearer {attempt_token}"}
    assert httpx.get(live_server.url + path, headers=token).status_code == 403


def test_the_page_is_served_without_data_or_secrets(live_server: LiveServer) -> None:
    page = httpx.get(f"{live_server.url}/ui", follow_redirects=True)
    assert page.status_code == 200 and '<main id="app">' in page.text
    assert live_server.admin_key not in page.text
    assert httpx.get(f"{live_server.url}/ui/app.js").status_code == 200


def test_the_page_loads_its_scripts_and_uplot_from_the_server_not_a_cdn(live_server: LiveServer) -> None:
    page = httpx.get(f"{live_server.url}/ui/").text
    assets = re.findall(r'(?:src|href)="([^"#]+)"', page)
    assert "vendor/uplot/uPlot.iife.min.js" in assets and "vendor/uplot/uPlot.min.css" in assets
    for asset in (a for a in assets if a != "data:,"):  # but the empty favicon
        assert "//" not in asset, asset  # served by this server, never a CDN
        assert httpx.get(f"{live_server.url}/ui/{asset}").status_code == 200, asset
    uplot = httpx.get(f"{live_server.url}/ui/vendor/uplot/uPlot.iife.min.js").text
    assert uplot.startswith("/*! https://github.com/leeoniya/uPlot (v1.6.32) */")


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ({"step": 1}, "pass `run` as well"),
        ({"run": "x", "step": 0}, "training steps count from 1"),
        ({"page": 0}, "page"),
        ({"per_page": 1000}, "per_page"),
        ({"state": "done"}, "state"),
        ({"failure_kind": "cosmic"}, "failure_kind"),
    ],
)
def test_bad_rollout_filters_are_a_4xx(admin_client: httpx.Client, query: dict[str, str | int], words: str) -> None:
    response = admin_client.get("/api/ui/rollouts", params=query)
    assert response.status_code == 422
    assert words in response.json()["error"]["message"]


def test_unknown_rollouts_and_runs_are_404(admin_client: httpx.Client) -> None:
    for path in UI_ROUTES[1:]:
        response = admin_client.get(path)
        assert response.status_code == 404, path
        assert "no " in response.json()["error"]["message"]


def test_a_rollout_without_attempts_has_no_view_yet(admin_client: httpx.Client) -> None:
    admin_client.post("/api/rollouts", json={"rollouts": [{"id": "queued1"}]})
    response = admin_client.get("/api/ui/rollouts/queued1/view")
    assert response.status_code == 404 and "has no attempts yet" in response.json()["error"]["message"]
