"""A rollout's runner env at rest, on SQLite and PostgreSQL: sealed in the row, masked on every read, open on a claim."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from cryptography.fernet import Fernet

from alight.api_models import RolloutFilter
from alight.schemas import RolloutCreate, RunnerSpec
from alight_server.store.base import Conflict
from alight_server.store.keys.kek import KEK_ENV, KekSource
from alight_server.store.keys.upstream import SECRET_KEY_ENV
from alight_server.store.runner_env import MASK
from alight_server.store.sql import SqlStore

SECRETS = {"HF_TOKEN": "hf_do-not-store-77c1", "DB_PASSWORD": "pw-9d2e"}


def create(store: SqlStore, rollout_id: str = "r-env") -> None:
    runner = RunnerSpec(command=["agent"], env=SECRETS, inherit_env=["AWS_*"])
    store.create_rollouts([RolloutCreate(id=rollout_id, task={"q": 1}, runner=runner)])


def raw_runner_column(store_url: str) -> str:
    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as conn:
            return "\n".join(str(row[0]) for row in conn.execute(sa.text("SELECT runner FROM rollouts")))
    finally:
        engine.dispose()


@pytest.fixture
def secret_key(monkeypatch: pytest.MonkeyPatch) -> str:
    key = Fernet.generate_key().decode()
    monkeypatch.setenv(SECRET_KEY_ENV, key)
    return key


@pytest.mark.parametrize("with_key", [True, False], ids=["ALIGHT_SECRET_KEY", "no-key"])
def test_the_stored_row_holds_no_runner_env_value(
    any_store: SqlStore, store_url: str, monkeypatch: pytest.MonkeyPatch, with_key: bool
) -> None:
    if with_key:
        monkeypatch.setenv(SECRET_KEY_ENV, Fernet.generate_key().decode())
    else:
        monkeypatch.delenv(SECRET_KEY_ENV, raising=False)
    create(any_store)
    column = raw_runner_column(store_url)
    assert "HF_TOKEN" in column and "AWS_*" in column  # the names stay readable
    assert not any(value in column for value in SECRETS.values())


def test_every_read_answers_the_values_masked(any_store: SqlStore, secret_key: str) -> None:
    create(any_store)
    runner = RunnerSpec(command=["agent"], env=SECRETS, inherit_env=["AWS_*"])
    (retried,) = any_store.create_rollouts([RolloutCreate(id="r-env", task={"q": 1}, runner=runner)])
    reads = [retried, any_store.get_rollout("r-env"), *any_store.list_rollouts()]
    reads += any_store.browse_rollouts(RolloutFilter())[0]
    for rollout in reads:
        assert rollout.runner is not None and rollout.runner.env == dict.fromkeys(SECRETS, MASK)


def test_a_claim_hands_the_controller_the_values_themselves(any_store: SqlStore, secret_key: str) -> None:
    create(any_store)
    ((rollout, attempt),) = any_store.claim_attempts(1)
    assert attempt == 1 and rollout.runner is not None and rollout.runner.env == SECRETS
    assert any_store.get_rollout("r-env").runner.env == dict.fromkeys(SECRETS, MASK)  # type: ignore[union-attr]


def test_a_store_reopened_with_the_same_key_opens_the_values(store_url: str, secret_key: str) -> None:
    first = SqlStore(store_url)
    create(first)
    first.close()
    again = SqlStore(store_url)
    try:
        ((rollout, _),) = again.claim_attempts(1)
        assert rollout.runner is not None and rollout.runner.env == SECRETS
    finally:
        again.close()


def test_a_value_sealed_under_another_key_fails_its_attempt_as_infra_naming_the_key(
    store_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(SECRET_KEY_ENV, raising=False)
    (tmp_path / "kek").write_text("7e" * 32)  # content's data keys under one lasting KEK: only the env values differ
    monkeypatch.setenv(KEK_ENV, f"file:{tmp_path / 'kek'}")
    first = SqlStore(store_url)  # no ALIGHT_SECRET_KEY: sealed under a key derived from the admin key
    first.seal_runner_env_under("alk_first-admin-key")
    create(first, "r-lost")
    create(first, "r-fresh")
    first.close()
    restarted = SqlStore(store_url)
    restarted.seal_runner_env_under("alk_another-admin-key")
    try:
        assert restarted.claim_attempts(5) == []  # neither can be opened; neither is handed out
        rollout = restarted.get_rollout("r-lost")
        (attempt,) = rollout.attempts
        assert (attempt.status, attempt.failure_kind) == ("failed", "infra")
        assert attempt.message and SECRET_KEY_ENV in attempt.message
        assert not any(value in attempt.message for value in SECRETS.values())
    finally:
        restarted.close()


def test_a_retried_create_that_a_restarted_server_cannot_open_is_a_conflict_naming_the_key(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not "a different body": the values may well be the same; what is missing is the key."""
    monkeypatch.delenv(SECRET_KEY_ENV, raising=False)
    first = SqlStore(store_url)
    first.seal_runner_env_under("alk_first-admin-key")
    create(first)
    first.close()
    restarted = SqlStore(store_url)
    restarted.seal_runner_env_under("alk_another-admin-key")
    try:
        with pytest.raises(Conflict, match=f"cannot compare.*{SECRET_KEY_ENV}") as refused:
            create(restarted)
        assert "different body" not in str(refused.value)
        assert not any(value in str(refused.value) for value in SECRETS.values())
    finally:
        restarted.close()


def test_a_retried_create_is_idempotent_and_a_changed_value_is_a_conflict(any_store: SqlStore, secret_key: str) -> None:
    create(any_store)
    create(any_store)  # the identical body: the stored rollout again
    changed = RunnerSpec(command=["agent"], env={**SECRETS, "DB_PASSWORD": "another"}, inherit_env=["AWS_*"])
    with pytest.raises(Conflict, match="different body"):
        any_store.create_rollouts([RolloutCreate(id="r-env", task={"q": 1}, runner=changed)])
    twice = [RolloutCreate(id="dup", runner=RunnerSpec(command=["a"], env={"K": v})) for v in ("one", "two")]
    with pytest.raises(Conflict, match="different body"):
        any_store.create_rollouts(twice)  # one id twice in a batch, with different values


def test_no_stored_hash_depends_on_an_env_value(any_store: SqlStore, store_url: str, secret_key: str) -> None:
    for rollout_id, value in (("a", "guess-1"), ("b", "guess-2")):
        runner = RunnerSpec(command=["agent"], env={"DB_PASSWORD": value})
        any_store.create_rollouts([RolloutCreate(id=rollout_id, task={"q": 1}, runner=runner)])
    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as conn:
            hashes = [row[0] for row in conn.execute(sa.text("SELECT body_hash FROM rollouts ORDER BY id"))]
    finally:
        engine.dispose()
    assert hashes[0] == hashes[1]  # a guessed value cannot be checked against the row


def test_a_server_restarted_with_its_admin_key_opens_what_it_sealed_without_alight_secret_key(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`alight train --resume` reuses its admin key: its async pool creates its in-flight rollouts again."""
    monkeypatch.delenv(SECRET_KEY_ENV, raising=False)
    data_key = KekSource.parse("secret", admin_key="alk_the-run-admin-key")  # as create_app opens it
    first = SqlStore(store_url, data_key)
    first.seal_runner_env_under("alk_the-run-admin-key")
    create(first)
    first.close()
    assert not any(value in raw_runner_column(store_url) for value in SECRETS.values())
    restarted = SqlStore(store_url, data_key)
    restarted.seal_runner_env_under("alk_the-run-admin-key")
    try:
        create(restarted)  # the same body again: the stored rollout, not a conflict
        [(rollout, _)] = restarted.claim_attempts(1)
        assert rollout.runner is not None and rollout.runner.env == SECRETS
    finally:
        restarted.close()
