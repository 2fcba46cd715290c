"""The gateway sends each upstream its key, opened or read at use; a key it cannot read is a 503 naming why."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
from cryptography.fernet import Fernet

from alight.schemas import UpstreamCreate
from alight_server.config import ServerConfig
from alight_server.stacks.server_thread import free_port
from alight_server.store.keys.upstream import SECRET_KEY_ENV


@pytest.fixture
def server_config(sqlite_url: str, tmp_path: Path) -> ServerConfig:
    """The server lets upstreams read $UPSTREAM_KEY and files under tmp_path/keys."""
    return ServerConfig(
        admin_key="k", db_url=sqlite_url, port=free_port(), upstream_key_env=["UPSTREAM_KEY"],
        upstream_key_dir=tmp_path / "keys",
    )  # fmt: skip


def _ask(gateway, attempt, **key: str) -> None:
    upstream = UpstreamCreate.model_validate({"id": "u1", "url": gateway.upstream.url, "model": "fake-policy", **key})
    gateway.server.store.add_upstream(upstream)
    gateway.server.app.state.gateway.upstreams.invalidate()
    client = openai.OpenAI(base_url=attempt.base_url, api_key=attempt.token, max_retries=0)
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])


def test_an_encrypted_key_reaches_the_upstream_as_its_bearer_token(
    gateway, attempt, fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_KEY_ENV, Fernet.generate_key().decode())
    _ask(gateway, attempt, api_key="sk-upstream-1")
    assert fake.calls[-1].headers["authorization"] == "Bearer sk-upstream-1"


def test_a_referenced_key_is_read_again_when_it_changes(
    gateway, attempt, fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "keys").mkdir()
    key_file = tmp_path / "keys" / "key"
    key_file.write_text("sk-file-1\n")
    _ask(gateway, attempt, api_key_file=str(key_file))
    key_file.write_text("sk-file-2\n")
    _ask(gateway, attempt, api_key_file=str(key_file))
    monkeypatch.setenv("UPSTREAM_KEY", "sk-env-1")
    _ask(gateway, attempt, api_key_env="UPSTREAM_KEY")
    assert [c.headers["authorization"] for c in fake.calls] == [
        "Bearer sk-file-1",
        "Bearer sk-file-2",
        "Bearer sk-env-1",
    ]


def test_a_key_the_server_cannot_read_is_a_503_naming_it_not_a_call_without_it(
    gateway, attempt, fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("UPSTREAM_KEY", raising=False)
    with pytest.raises(openai.APIStatusError) as info:
        _ask(gateway, attempt, api_key_env="UPSTREAM_KEY")
    assert info.value.status_code == 503 and "$UPSTREAM_KEY, which is not set" in info.value.message
    assert fake.calls == []


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ({"api_key_env": SECRET_KEY_ENV}, "alight's own variables"),
        ({"api_key_env": "HOME"}, "upstream_key_env (env ALIGHT_UPSTREAM_KEY_ENV) allows: UPSTREAM_KEY"),
        ({"api_key_file": "/etc/hostname"}, "upstream_key_dir (env ALIGHT_UPSTREAM_KEY_DIR)"),
    ],
)
def test_a_stored_reference_the_server_does_not_allow_is_a_503_and_nothing_is_sent(
    gateway, attempt, fake, monkeypatch: pytest.MonkeyPatch, key: dict[str, str], says: str
) -> None:
    """Written to the store around the API (or before the rule): the gateway checks again when it reads the key."""
    secret = Fernet.generate_key().decode()
    monkeypatch.setenv(SECRET_KEY_ENV, secret)
    with pytest.raises(openai.APIStatusError) as info:
        _ask(gateway, attempt, **key)
    assert info.value.status_code == 503 and says in info.value.message
    assert secret not in info.value.message and fake.calls == []
