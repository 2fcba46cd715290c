"""Upstream API keys through the API: accepted three ways, never answered back, refused when they cannot be kept."""

from __future__ import annotations

import httpx
import pytest
from cryptography.fernet import Fernet

from alight.schemas import UpstreamCreate
from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.store.sql import SqlStore
from alight_server.upstream_keys import SECRET_KEY_ENV, UpstreamKeyError

PLAIN = "sk-live-never-echoed-91c3"


def test_no_admin_route_answers_with_a_stored_key(admin_client: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_KEY_ENV, Fernet.generate_key().decode())
    created = admin_client.post("/api/upstreams", json={"id": "u", "url": "http://h:1/v1", "api_key": PLAIN})
    assert created.status_code == 200 and created.json()["api_key_encrypted"] is True
    answers = [created.text] + [
        admin_client.get(path).text for path in ("/api/upstreams", "/api/policy", "/api/ui/overview", "/openapi.json")
    ]
    assert not [a for a in answers if PLAIN in a or "gAAAA" in a]  # neither the key nor its Fernet token


def test_an_api_key_on_a_server_without_a_secret_key_is_a_422_naming_the_other_ways(
    admin_client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SECRET_KEY_ENV, raising=False)
    refused = admin_client.post("/api/upstreams", json={"id": "u", "url": "http://h:1/v1", "api_key": PLAIN})
    assert refused.status_code == 422
    message = refused.json()["error"]["message"]
    assert SECRET_KEY_ENV in message and "api_key_env" in message and PLAIN not in refused.text
    assert admin_client.get("/api/upstreams").json() == {"upstreams": []}


def test_references_are_answered_as_the_names_they_are(admin_client: httpx.Client) -> None:
    body = {"id": "u", "url": "http://h:1/v1", "api_key_env": "VLLM_API_KEY"}
    assert admin_client.post("/api/upstreams", json=body).json()["api_key_env"] == "VLLM_API_KEY"
    body = {"id": "f", "url": "http://h:1/v1", "api_key_file": "/run/secrets/vllm"}
    assert admin_client.post("/api/upstreams", json=body).json()["api_key_file"] == "/run/secrets/vllm"


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"api_key": "a", "api_key_env": "B"}, "at most one of api_key, api_key_env and api_key_file"),
        ({"api_key_env": "NOT-A-NAME"}, "api_key_env"),
        ({"api_key_file": "relative/key"}, "absolute path"),
        ({"api_key": ""}, "api_key"),
    ],
)
def test_a_key_given_wrongly_is_a_422_saying_how(admin_client: httpx.Client, extra: dict[str, str], says: str) -> None:
    refused = admin_client.post("/api/upstreams", json={"id": "u", "url": "http://h:1/v1", **extra})
    assert refused.status_code == 422 and says in refused.json()["error"]["message"], refused.text


def test_a_server_whose_secret_key_cannot_open_the_stored_keys_refuses_to_start(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_KEY_ENV, Fernet.generate_key().decode())
    store = SqlStore(sqlite_url)
    store.add_upstream(UpstreamCreate(id="u", url="http://h:1/v1", api_key=PLAIN))
    monkeypatch.delenv(SECRET_KEY_ENV)
    try:
        with pytest.raises(
            UpstreamKeyError, match=f"'u' has an encrypted api_key, and this server has no {SECRET_KEY_ENV}"
        ):
            create_app(ServerConfig(admin_key="k", db_url=sqlite_url), store=store)
    finally:
        store.close()
