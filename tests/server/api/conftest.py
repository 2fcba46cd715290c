"""API test fixtures: create rollouts and claim attempts over HTTP."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

Create = Callable[..., list[dict[str, Any]]]
Claim = Callable[[str], dict[str, Any]]


@pytest.fixture
def create(admin_client: httpx.Client) -> Create:
    """create({"id": "r"}, {...}) -> the created rollouts as JSON."""

    def _create(*items: dict[str, Any]) -> list[dict[str, Any]]:
        response = admin_client.post("/api/rollouts", json={"rollouts": list(items) or [{}]})
        assert response.status_code == 200, response.text
        return response.json()["rollouts"]

    return _create


@pytest.fixture
def claim(admin_client: httpx.Client) -> Claim:
    """claim("r") -> the AttemptStart JSON (token, URLs) of r's next attempt."""

    def _claim(rollout_id: str) -> dict[str, Any]:
        response = admin_client.post("/api/attempts/claim", json={"limit": 1, "ids": [rollout_id]})
        assert response.status_code == 200, response.text
        (start,) = response.json()["attempts"]
        return start

    return _claim


@pytest.fixture
def running(create: Create, claim: Claim) -> dict[str, Any]:
    """Rollout `r1` with attempt 1 claimed: its AttemptStart as JSON."""
    create({"id": "r1", "task": {"q": 1}})
    return claim("r1")
