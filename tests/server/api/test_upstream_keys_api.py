"""Upstream API keys through the API: accepted three ways, never answered back, refused when they cannot be kept."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet
from test_serve import serve

from alight.schemas import UpstreamCreate
from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_server.store.keys.upstream import SECRET_KEY_ENV, UpstreamKeyError
from alight_server.store.sql import SqlStore

PLAIN = "sk-live-never-echoed-91c3"
ADMIN = "admin-key-of-these-tests"


@pytest.fixture
def key_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "keys"
    folder.mkdir()
    return folder


@pytest.fixture
def server_config(sqlite_url: str, key_dir: Path) -> ServerConfig:
    """The shared live server of this module allows variables VLLM_* and files under `key_dir`."""
    return ServerConfig(
        admin_key=ADMIN, db_url=sqlite_url, port=free_port(), upstream_key_env=["VLLM_*"], upstream_key_dir=key_dir
    )


@pytest.fixture
def live_server_on(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """live_server_on(**settings): the URL of another server on loopback, with these key settings."""
    started: list[tuple[ServerThread, SqlStore]] = []

    def start(**settings: Any) -> str:
        config = ServerConfig(
            admin_key=ADMIN, db_url=f"sqlite:///{tmp_path / 'other.db'}", port=free_port(), **settings
        )
        store = SqlStore(config.db_url)
        thread = ServerThread(create_app(config, store=store), port=config.port)
        started.append((thread, store))
        return thread.start()

    yield start
    for thread, store in started:
        thread.stop()
        store.close()


def _register(url: str, key: dict[str, str]) -> httpx.Response:
    body = {"id": "u", "url": "http://h:1/v1", **key}
    return httpx.post(f"{url}/api/upstreams", json=body, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10)


def _listed(url: str) -> list[Any]:
    answer = httpx.get(f"{url}/api/upstreams", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10)
    return answer.json()["upstreams"]


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


def test_references_are_answered_as_the_names_they_are(admin_client: httpx.Client, key_dir: Path) -> None:
    body = {"id": "u", "url": "http://h:1/v1", "api_key_env": "VLLM_API_KEY"}
    assert admin_client.post("/api/upstreams", json=body).json()["api_key_env"] == "VLLM_API_KEY"
    body = {"id": "f", "url": "http://h:1/v1", "api_key_file": f"{key_dir}/vllm"}
    assert admin_client.post("/api/upstreams", json=body).json()["api_key_file"] == f"{key_dir}/vllm"


@pytest.mark.parametrize(
    "name", [SECRET_KEY_ENV, "ALIGHT_ADMIN_KEY", "ALIGHT_VLLM_API_KEY", "alight_secret_key", "Alight_Token"]
)
def test_alights_own_variables_are_a_422_even_where_the_pattern_matches_them(
    live_server_on: Callable[..., str], name: str
) -> None:
    server = live_server_on(upstream_key_env=["*", "ALIGHT_*", "VLLM_*"])
    refused = _register(server, {"api_key_env": name})
    assert refused.status_code == 422, refused.text
    message = refused.json()["error"]["message"]
    assert "ALIGHT_*" in message and "upstream_key_env" in message and "another variable" in message
    assert _listed(server) == []


@pytest.mark.parametrize("name", ["AWS_SECRET_ACCESS_KEY", "HOME", "VLLM", "XVLLM_KEY", "vllm_key"])
def test_a_variable_the_setting_does_not_allow_is_a_422_naming_the_setting(
    admin_client: httpx.Client, name: str
) -> None:
    refused = admin_client.post("/api/upstreams", json={"id": "u", "url": "http://h:1/v1", "api_key_env": name})
    assert refused.status_code == 422, refused.text
    message = refused.json()["error"]["message"]
    assert "upstream_key_env (env ALIGHT_UPSTREAM_KEY_ENV) allows: VLLM_*" in message and "add a pattern" in message
    assert admin_client.get("/api/upstreams").json() == {"upstreams": []}


def test_a_server_that_allows_no_references_refuses_both_naming_the_settings(
    live_server_on: Callable[..., str], tmp_path: Path
) -> None:
    server = live_server_on()  # the defaults: no pattern, no folder
    env = _register(server, {"api_key_env": "VLLM_API_KEY"})
    assert env.status_code == 422 and "allows: none" in env.json()["error"]["message"]
    file = _register(server, {"api_key_file": str(tmp_path / "key")})
    assert file.status_code == 422 and "upstream_key_dir (env ALIGHT_UPSTREAM_KEY_DIR)" in file.text
    assert "which is not set" in file.json()["error"]["message"]
    assert _listed(server) == []


def test_key_files_outside_the_folder_are_a_422_after_symlinks_and_dots_are_resolved(
    admin_client: httpx.Client, key_dir: Path, tmp_path: Path
) -> None:
    (tmp_path / "outside").write_text("sk-outside")
    (key_dir / "link").symlink_to(tmp_path / "outside")
    (key_dir / "linked-dir").symlink_to(tmp_path)
    attempts = [
        "/etc/passwd",
        str(tmp_path / "outside"),
        f"{key_dir}/../outside",
        f"{key_dir}/link",
        f"{key_dir}/linked-dir/outside",
        str(key_dir),
        f"{key_dir}/.",
        f"{key_dir}-sibling/key",  # a prefix of the folder's name is not the folder
    ]
    for path in attempts:
        refused = admin_client.post("/api/upstreams", json={"id": "u", "url": "http://h:1/v1", "api_key_file": path})
        assert refused.status_code == 422, (path, refused.text)
        message = refused.json()["error"]["message"]
        assert "upstream_key_dir (env ALIGHT_UPSTREAM_KEY_DIR)" in message and "sk-outside" not in refused.text
    assert admin_client.get("/api/upstreams").json() == {"upstreams": []}


def test_alight_serve_takes_the_key_settings_from_its_environment(tmp_path: Path) -> None:
    (tmp_path / "keys").mkdir()
    env = {"ALIGHT_UPSTREAM_KEY_ENV": "VLLM_*, OPENROUTER_KEY", "ALIGHT_UPSTREAM_KEY_DIR": str(tmp_path / "keys")}
    with serve(["--admin-key", "k", "--db", str(tmp_path / "a.db")], env=env) as (_, url):
        headers = {"Authorization": "Bearer k"}

        def register(**key: str) -> int:
            body = {"id": "u", "url": "http://h:1/v1", **key}
            return httpx.post(f"{url}/api/upstreams", json=body, headers=headers, timeout=10).status_code

        assert [register(api_key_env=n) for n in ("VLLM_KEY", "OPENROUTER_KEY", "OPENAI_API_KEY")] == [200, 200, 422]
        assert register(api_key_file=str(tmp_path / "keys" / "k")) == 200
        assert register(api_key_file=str(tmp_path / "elsewhere")) == 422


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
