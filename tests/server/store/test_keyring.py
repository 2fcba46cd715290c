"""Data keys: stored only wrapped, opened by the store's KEK source (secret, file, command), refused otherwise."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sqlalchemy import select, update

from alight_server.config import ServerConfig
from alight_server.store import tables as t
from alight_server.store.keys.kek import KekError, KekSource
from alight_server.store.keys.keyring import Keyring, SealError
from alight_server.store.sql import SqlStore


def _key_file(path: Path, byte: int) -> KekSource:
    path.write_text(bytes([byte]).hex() * 32)
    return KekSource.parse(f"file:{path}")


def test_a_new_store_holds_one_data_key_and_never_its_bytes(store_url: str, tmp_path: Path) -> None:
    source = _key_file(tmp_path / "kek", 7)
    store = SqlStore(store_url, source)
    try:
        key_id, key = store.keyring.current()
        with store.engine.connect() as conn:
            rows = conn.execute(select(t.data_keys)).all()
        assert [r.id for r in rows] == [key_id]
        assert len(key) == 32 and key.hex() not in rows[0].wrapped and key not in rows[0].wrapped.encode()
    finally:
        store.close()


def test_a_store_reopened_with_the_same_kek_opens_its_keys(store_url: str, tmp_path: Path) -> None:
    source = _key_file(tmp_path / "kek", 7)
    first = SqlStore(store_url, source)
    key_id, key = first.keyring.current()
    first.close()
    again = SqlStore(store_url, KekSource.parse(f"file:{tmp_path / 'kek'}"))
    try:
        assert again.keyring.current() == (key_id, key)
        assert again.keyring.key(key_id) == key
    finally:
        again.close()


def test_a_key_wrapped_under_another_kek_is_refused_naming_it_and_the_fix(sqlite_url: str, tmp_path: Path) -> None:
    first = SqlStore(sqlite_url, _key_file(tmp_path / "a", 1))
    key_id, _ = first.keyring.current()
    first.close()
    other = SqlStore(sqlite_url, _key_file(tmp_path / "b", 2))
    try:
        assert other.keyring.current()[0] != key_id  # new cells get a key this KEK opens
        with pytest.raises(SealError, match=f"{key_id}.*data_key.*rotate-key"):
            other.keyring.key(key_id)
    finally:
        other.close()


def test_a_wrapped_key_copied_onto_another_id_does_not_open(sqlite_url: str, tmp_path: Path) -> None:
    source = _key_file(tmp_path / "kek", 3)
    store = SqlStore(sqlite_url, source)
    first, _ = store.keyring.current()
    second, _ = store.keyring.add_key()
    with store.engine.begin() as conn:
        wrapped = conn.execute(select(t.data_keys.c.wrapped).where(t.data_keys.c.id == first)).scalar_one()
        conn.execute(update(t.data_keys).where(t.data_keys.c.id == second).values(wrapped=wrapped))
    store.close()
    with pytest.raises(SealError, match=f"data key '{second}' does not open"):
        Keyring.open(SqlStore(sqlite_url, source).engine, source)


def test_a_key_added_by_another_process_is_found_on_first_use(sqlite_url: str, tmp_path: Path) -> None:
    source = _key_file(tmp_path / "kek", 4)
    reader = SqlStore(sqlite_url, source)
    writer = SqlStore(sqlite_url, source)
    try:
        key_id, key = writer.keyring.add_key()
        assert reader.keyring.key(key_id) == key
    finally:
        reader.close()
        writer.close()


def test_the_server_secret_kek_is_derived_from_the_admin_key_without_alight_secret_key(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ALIGHT_SECRET_KEY", raising=False)
    first = SqlStore(sqlite_url, ServerConfig(admin_key="admin-one").kek_source())
    key_id, key = first.keyring.current()
    first.close()
    same = SqlStore(sqlite_url, ServerConfig(admin_key="admin-one").kek_source())
    other = SqlStore(sqlite_url, ServerConfig(admin_key="admin-two").kek_source())
    try:
        assert same.keyring.key(key_id) == key
        with pytest.raises(SealError, match=key_id):
            other.keyring.key(key_id)
    finally:
        same.close()
        other.close()


def test_alight_secret_key_opens_keys_wrapped_under_the_admin_key_before_it_was_set(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ALIGHT_SECRET_KEY", raising=False)
    first = SqlStore(sqlite_url, KekSource.parse("secret", admin_key="admin"))
    key_id, key = first.keyring.current()
    first.close()
    monkeypatch.setenv("ALIGHT_SECRET_KEY", "a" * 43 + "=")
    later = SqlStore(sqlite_url, KekSource.parse("secret", admin_key="admin"))
    try:
        assert later.keyring.key(key_id) == key
    finally:
        later.close()


def test_a_key_managers_command_supplies_the_kek(sqlite_url: str, tmp_path: Path) -> None:
    script = tmp_path / "kms.py"
    script.write_text("print('ab' * 32)\n")
    source = KekSource.parse(f"command:{sys.executable} {script}")
    store = SqlStore(sqlite_url, source)
    key_id, key = store.keyring.current()
    store.close()
    again = SqlStore(sqlite_url, _key_file(tmp_path / "same", 0xAB))  # the same 32 bytes from a file
    try:
        assert again.keyring.key(key_id) == key
    finally:
        again.close()


def test_a_failing_key_command_names_the_command_and_its_error(tmp_path: Path) -> None:
    script = tmp_path / "kms.py"
    script.write_text("import sys; sys.exit('vault: permission denied')\n")
    with pytest.raises(KekError, match=r"kms\.py.*exit status 1: vault: permission denied"):
        KekSource.parse(f"command:{sys.executable} {script}").keys()


def test_a_key_file_that_is_not_a_key_names_the_file_and_the_forms(tmp_path: Path) -> None:
    bad = tmp_path / "kek.txt"
    bad.write_text("hunter2\n")
    with pytest.raises(KekError, match=r"kek\.txt.*32 raw bytes, 64 hex digits or base64"):
        KekSource.parse(f"file:{bad}").keys()


def test_a_missing_key_file_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(KekError, match=r"cannot read the key file .*nope.*data_key"):
        SqlStore(f"sqlite:///{tmp_path / 'db'}", KekSource.parse(f"file:{tmp_path / 'nope'}"))


def test_the_server_config_takes_data_key_as_a_mapping_or_a_string(tmp_path: Path) -> None:
    assert ServerConfig(data_key={"file": "/run/kek"}).data_key == "file:/run/kek"  # pyright: ignore[reportArgumentType]
    assert ServerConfig(data_key="command:vault read -field=key kek").kek_source().kind == "command"
    with pytest.raises(ValueError, match=r"secret.*file:PATH.*command:CMD"):
        ServerConfig(data_key="s3://bucket/kek")


def test_alight_serve_with_an_unreadable_data_key_refuses_to_start_naming_the_file(tmp_path: Path) -> None:
    import subprocess

    alight = str(Path(sys.executable).parent / "alight")
    command = [
        alight,
        "serve",
        "--db",
        str(tmp_path / "a.db"),
        "--port",
        "0",
        "--data-key",
        f"file:{tmp_path / 'gone'}",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert "cannot read the key file" in done.stderr and "gone" in done.stderr and "data_key" in done.stderr


def test_a_store_opened_without_a_kek_opens_its_keys_again_in_the_same_process_only(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ALIGHT_DATA_KEY", "ALIGHT_SECRET_KEY"):
        monkeypatch.delenv(name, raising=False)
    first = SqlStore(sqlite_url)
    key_id, key = first.keyring.current()
    first.close()
    again = SqlStore(sqlite_url)
    try:
        assert again.keyring.current() == (key_id, key)
    finally:
        again.close()
    probe = "from alight_server.store.keys.kek import KekSource; print(KekSource('process').ids()[0])"
    import subprocess

    other = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert other.startswith("process-") and other not in KekSource("process").ids()  # another process: another key
