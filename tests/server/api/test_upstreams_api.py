"""Upstream and policy-version routes (admin only)."""

from __future__ import annotations

import httpx
import pytest


def test_upstreams_register_list_replace_and_delete(admin_client: httpx.Client) -> None:
    body = {"id": "vllm-0", "url": "http://10.0.0.5:8000/v1", "model": "qwen"}
    created = admin_client.post("/api/upstreams", json=body).json()
    assert created["url"] == body["url"] and created["model"] == "qwen"
    admin_client.post("/api/upstreams", json={**body, "policy_version": 2})
    (listed,) = admin_client.get("/api/upstreams").json()["upstreams"]
    assert listed["policy_version"] == 2
    assert admin_client.delete("/api/upstreams/vllm-0").status_code == 204
    assert admin_client.get("/api/upstreams").json() == {"upstreams": []}
    missing = admin_client.delete("/api/upstreams/vllm-0")
    assert missing.status_code == 404 and "vllm-0" in missing.json()["error"]["message"]


@pytest.mark.parametrize(
    "url",
    [
        "0",
        "localhost:8000/v1",
        "ftp://host/v1",
        "http:///v1",
        "http://host:99999/v1",
        " http://h/v1",
        "http://h/v1?x=1",
    ],
)
def test_an_upstream_url_that_cannot_be_called_is_refused_at_registration(admin_client: httpx.Client, url: str) -> None:
    response = admin_client.post("/api/upstreams", json={"id": "bad", "url": url})
    assert response.status_code == 422, response.text
    assert "http:// or https://" in response.text or "no query" in response.text
    assert admin_client.get("/api/upstreams").json() == {"upstreams": []}


def test_policy_versions_count_up_from_zero(admin_client: httpx.Client) -> None:
    assert admin_client.get("/api/policy").json() == {"current": 0, "versions": []}
    v1 = admin_client.post("/api/policy", json={"metadata": {"step": 1}}).json()
    assert v1["version"] == 1 and v1["metadata"] == {"step": 1}
    assert admin_client.post("/api/policy", json={}).json()["version"] == 2
    state = admin_client.get("/api/policy").json()
    assert state["current"] == 2 and [v["version"] for v in state["versions"]] == [1, 2]
    created = admin_client.post("/api/rollouts", json={"rollouts": [{}]}).json()["rollouts"]
    assert created[0]["policy_version"] == 2
