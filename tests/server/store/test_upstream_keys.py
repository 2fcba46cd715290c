"""Upstream API keys at rest, on SQLite and PostgreSQL: only encrypted, references never resolved into the store."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from cryptography.fernet import Fernet

from alight.schemas import Upstream, UpstreamCreate
from alight_server.store.base import StoreError
from alight_server.store.keys.upstream import SECRET_KEY_ENV, KeySources, UpstreamKeyError, check_sealed
from alight_server.store.keys.upstream import resolve as resolve_with
from alight_server.store.sql import SqlStore

PLAIN = "sk-live-do-not-store-4f2a"
ANYWHERE = KeySources(("*",), Path("/"))  # what an operator allowing every variable and file would set


def resolve(upstream: Upstream) -> str | None:
    return resolve_with(upstream, ANYWHERE)


@pytest.fixture
def secret_key(monkeypatch: pytest.MonkeyPatch) -> str:
    key = Fernet.generate_key().decode()
    monkeypatch.setenv(SECRET_KEY_ENV, key)
    return key


def _raw_rows(store_url: str) -> list[dict[str, object]]:
    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(sa.text("SELECT * FROM upstreams"))]
    finally:
        engine.dispose()


def _sqlite_bytes(store_url: str) -> bytes:
    path = Path(store_url.removeprefix("sqlite:///"))
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))  # the file, its WAL and shm


def test_an_api_key_is_stored_only_as_a_token_the_secret_key_opens(
    any_store: SqlStore, store_url: str, secret_key: str
) -> None:
    any_store.add_upstream(UpstreamCreate(id="u", url="http://h:1/v1", api_key=PLAIN))
    (row,) = _raw_rows(store_url)
    assert PLAIN not in repr(row)
    assert Fernet(secret_key.encode()).decrypt(str(row["api_key_sealed"]).encode()).decode() == PLAIN
    (listed,) = any_store.list_upstreams()
    assert listed.api_key_encrypted and resolve(listed) == PLAIN
    assert PLAIN not in repr(listed) and "api_key_sealed" not in listed.model_dump()
    if store_url.startswith("sqlite"):
        assert PLAIN.encode() not in _sqlite_bytes(store_url)


def test_an_api_key_without_a_secret_key_is_refused_and_nothing_is_stored(
    any_store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SECRET_KEY_ENV, raising=False)
    with pytest.raises(UpstreamKeyError, match=f"no {SECRET_KEY_ENV}.*api_key_env"):
        any_store.add_upstream(UpstreamCreate(id="u", url="http://h:1/v1", api_key=PLAIN))
    assert any_store.list_upstreams() == []


def test_stored_keys_that_this_secret_key_cannot_open_are_named(
    any_store: SqlStore, secret_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    any_store.add_upstream(UpstreamCreate(id="u", url="http://h:1/v1", api_key=PLAIN))
    monkeypatch.setenv(SECRET_KEY_ENV, Fernet.generate_key().decode())
    with pytest.raises(UpstreamKeyError, match="does not decrypt the api_key of upstream 'u'"):
        check_sealed(any_store.list_upstreams())
    monkeypatch.delenv(SECRET_KEY_ENV)
    with pytest.raises(
        UpstreamKeyError, match=f"'u' has an encrypted api_key, and this server has no {SECRET_KEY_ENV}"
    ):
        check_sealed(any_store.list_upstreams())


def test_a_rotated_secret_key_still_opens_keys_sealed_under_the_old_one(
    any_store: SqlStore, secret_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    any_store.add_upstream(UpstreamCreate(id="old", url="http://h:1/v1", api_key=PLAIN))
    monkeypatch.setenv(SECRET_KEY_ENV, f"{Fernet.generate_key().decode()},{secret_key}")
    any_store.add_upstream(UpstreamCreate(id="new", url="http://h:2/v1", api_key="sk-new"))
    assert {u.id: resolve(u) for u in any_store.list_upstreams()} == {"old": PLAIN, "new": "sk-new"}


def test_references_are_stored_as_names_and_read_at_each_use(
    any_store: SqlStore, store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("sk-from-file-1\n")
    monkeypatch.setenv("VLLM_KEY", "sk-from-env-1")
    any_store.add_upstream(UpstreamCreate(id="env", url="http://h:1/v1", api_key_env="VLLM_KEY"))
    any_store.add_upstream(UpstreamCreate(id="file", url="http://h:2/v1", api_key_file=str(key_file)))
    assert {u.id: resolve(u) for u in any_store.list_upstreams()} == {"env": "sk-from-env-1", "file": "sk-from-file-1"}
    key_file.write_text("sk-from-file-2")
    monkeypatch.setenv("VLLM_KEY", "sk-from-env-2")
    assert {u.id: resolve(u) for u in any_store.list_upstreams()} == {"env": "sk-from-env-2", "file": "sk-from-file-2"}
    assert "sk-from" not in repr(_raw_rows(store_url))


def test_a_reference_that_cannot_be_read_names_what_is_missing(
    any_store: SqlStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    any_store.add_upstream(UpstreamCreate(id="env", url="http://h:1/v1", api_key_env="NO_SUCH_KEY"))
    any_store.add_upstream(UpstreamCreate(id="file", url="http://h:2/v1", api_key_file=str(tmp_path / "gone")))
    env, file = any_store.list_upstreams()
    with pytest.raises(UpstreamKeyError, match=r"\$NO_SUCH_KEY, which is not set"):
        resolve(env)
    with pytest.raises(UpstreamKeyError, match=f"{tmp_path / 'gone'}, which the server cannot read"):
        resolve(file)


def _make_schema_2(store_url: str) -> None:
    """What a store written by schema 2 has: the upstream's api_key in a plain-text column."""
    SqlStore(store_url).close()
    engine = sa.create_engine(store_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE upstreams")
        conn.exec_driver_sql(
            "CREATE TABLE upstreams (id VARCHAR(200) PRIMARY KEY, url TEXT NOT NULL, policy_version INTEGER NOT NULL, "
            "model VARCHAR(500), api_key TEXT, created_at TIMESTAMP WITH TIME ZONE NOT NULL)"
        )
        conn.exec_driver_sql(
            f"INSERT INTO upstreams VALUES ('u', 'http://h:1/v1', 0, 'm', '{PLAIN}', '2026-01-01 00:00:00')"
        )
        conn.exec_driver_sql("INSERT INTO upstreams VALUES ('n', 'http://h:2/v1', 0, 'm', NULL, '2026-01-01 00:00:00')")
        conn.exec_driver_sql("UPDATE schema_version SET version = 2")
    engine.dispose()


def test_plain_text_keys_of_a_schema_2_store_are_encrypted_when_it_opens(store_url: str, secret_key: str) -> None:
    _make_schema_2(store_url)
    store = SqlStore(store_url)
    try:
        assert {u.id: resolve(u) for u in store.list_upstreams()} == {"u": PLAIN, "n": None}
    finally:
        store.close()
    rows = _raw_rows(store_url)
    assert all("api_key" not in row for row in rows) and PLAIN not in repr(rows)
    if store_url.startswith("sqlite"):
        assert PLAIN.encode() not in _sqlite_bytes(store_url)  # no byte of the old row is left in the file


def test_a_schema_2_store_with_plain_keys_and_no_secret_key_is_refused_unchanged(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SECRET_KEY_ENV, raising=False)
    _make_schema_2(store_url)
    with pytest.raises(StoreError, match=f"1 upstream\\(s\\) in plain text.*set {SECRET_KEY_ENV}"):
        SqlStore(store_url)
    assert [row["api_key"] for row in _raw_rows(store_url)] == [PLAIN, None]  # rolled back: nothing changed


def test_a_stored_reference_to_alights_own_variables_reads_nothing_even_when_every_name_is_allowed(
    any_store: SqlStore, secret_key: str
) -> None:
    """A row stored before the rule (or written around the API) still cannot send the sealing key anywhere."""
    any_store.add_upstream(UpstreamCreate(id="env", url="http://h:1/v1", api_key_env=SECRET_KEY_ENV))
    (env,) = any_store.list_upstreams()
    with pytest.raises(UpstreamKeyError, match="alight's own variables") as refused:
        resolve(env)
    assert secret_key not in str(refused.value)


def test_a_stored_reference_outside_the_key_folder_reads_nothing(any_store: SqlStore, tmp_path: Path) -> None:
    allowed, outside = tmp_path / "keys", tmp_path / "outside"
    allowed.mkdir()
    outside.write_text("sk-outside")
    (allowed / "link").symlink_to(outside)
    for i, path in enumerate([outside, allowed / "link", allowed / ".." / "outside"]):
        any_store.add_upstream(UpstreamCreate(id=f"f{i}", url="http://h:1/v1", api_key_file=str(path)))
    for upstream in any_store.list_upstreams():
        with pytest.raises(UpstreamKeyError, match="upstream_key_dir") as refused:
            resolve_with(upstream, KeySources(folder=allowed))
        assert "sk-outside" not in str(refused.value)


def test_a_key_file_swapped_for_a_symlink_after_its_check_is_not_followed_out_of_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path the folder check passed is the path opened: a link swapped in between reads nothing."""
    allowed, outside = tmp_path / "keys", tmp_path / "outside"
    allowed.mkdir()
    outside.write_text("sk-outside")
    key = allowed / "k"
    key.write_text("sk-inside")
    checked = KeySources.key_file

    def check_then_swap(sources: KeySources, path: str) -> tuple[Path, str | None]:
        answer = checked(sources, path)
        key.unlink()
        key.symlink_to(outside)  # the swap lands after the check, before the read
        return answer

    monkeypatch.setattr(KeySources, "key_file", check_then_swap)
    upstream = Upstream(id="f", url="http://h:1/v1", policy_version=0, model=None, api_key_file=str(key),
                        created_at=datetime.now(UTC))  # fmt: skip
    with pytest.raises(UpstreamKeyError, match="cannot read") as refused:
        resolve_with(upstream, KeySources(folder=allowed))
    assert "sk-outside" not in str(refused.value)
