"""Issue 30's boundaries attacked as a hostile policy would: text that looks sealed, ids crafted to collide in
the associated data, and ids with NUL, through the real API on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
import sqlalchemy as sa
from sealing_testkit import make_legacy_store, write_content

from alight.schemas import EventCreate, RolloutCreate
from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_server.store.base import SealError
from alight_server.store.keys.seal_existing import seal_existing
from alight_server.store.keys.sealing import PREFIX
from alight_server.store.sql import SqlStore
from alight_server.store.tables import attempts, events

ADMIN = "alk_attacks-test-admin-key"
MARKER = "attack-marker-" + uuid.uuid4().hex


@pytest.fixture
def api(any_store: SqlStore) -> Iterator[httpx.Client]:
    config = ServerConfig(admin_key=ADMIN, db_url=any_store.url, port=free_port())
    headers = {"Authorization": f"Bearer {ADMIN}"}
    with (
        ServerThread(create_app(config, store=any_store), port=config.port) as url,
        httpx.Client(base_url=url, headers=headers, timeout=30) as client,
    ):
        yield client


def _raw(store: SqlStore, table: sa.Table, column: str, where: sa.ColumnElement[bool]) -> str:
    with store.engine.connect() as conn:
        return conn.execute(sa.select(table.c[column]).where(where)).scalar_one()


def test_a_model_written_copy_of_another_rows_sealed_cell_is_stored_as_text_and_never_opened(
    any_store: SqlStore, api: httpx.Client
) -> None:
    write_content(any_store, "victim", MARKER)
    stolen = _raw(any_store, attempts, "message", attempts.c.rollout_id == "victim")  # raw text column
    assert stolen.startswith(PREFIX)
    api.post("/api/rollouts", json={"rollouts": [{"id": "attacker"}]}).raise_for_status()
    [claim] = api.post("/api/attempts/claim", json={"limit": 1, "ids": ["attacker"]}).json()["attempts"]
    agent = {"Authorization": f"Bearer {claim['token']}"}
    posted = api.post("/api/rollouts/attacker/events", json={"kind": "note", "payload": {"x": stolen}}, headers=agent)
    assert posted.status_code == 200, posted.text
    api.post(
        "/api/rollouts/attacker/attempts/1/finish", json={"status": "failed", "failure_kind": "task", "message": stolen}
    ).raise_for_status()
    [event] = api.get("/api/rollouts/attacker/events", params={"reveal": "true"}).json()["events"]
    rollout = api.get("/api/rollouts/attacker").json()
    assert event["payload"] == {"x": stolen} and rollout["attempts"][0]["message"] == stolen  # exactly as written
    stored = _raw(any_store, attempts, "message", attempts.c.rollout_id == "attacker")
    assert stored != stolen and stored.startswith(PREFIX)  # sealed around the look-alike, bound to its own row
    view = api.get("/api/ui/rollouts/attacker/view", params={"reveal": "true"}).text
    assert MARKER not in view and MARKER not in str(event) and MARKER not in str(rollout)


def test_ids_that_concatenate_alike_do_not_share_associated_data(any_store: SqlStore) -> None:
    # events are bound to (rollout_id, id): ("a", "bc") and ("ab", "c") read "abc" if joined without lengths.
    any_store.create_rollouts([RolloutCreate(id="a"), RolloutCreate(id="ab")])
    any_store.add_event("a", EventCreate(id="bc", kind="note", payload={"secret": MARKER}))
    any_store.add_event("ab", EventCreate(id="c", kind="note", payload={"secret": "other"}))
    theirs = _raw(any_store, events, "payload", sa.and_(events.c.rollout_id == "a", events.c.id == "bc"))
    with any_store.engine.begin() as conn:
        where = sa.and_(events.c.rollout_id == "ab", events.c.id == "c")
        conn.execute(sa.update(events).where(where).values(payload=theirs))
    with pytest.raises(SealError, match=r"events row rollout_id='ab', id='c' column payload"):
        any_store.list_events("ab")


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/rollouts/r/events", {"id": "a\x00b", "kind": "note"}),
        ("/api/rollouts/r/events", {"kind": "no\x00te"}),
        ("/api/rollouts/r/rewards", {"attempt": 1, "value": 1.0, "name": "a\x00b"}),
        ("/api/rollouts/r/rewards", {"id": "a\x00b", "attempt": 1, "value": 1.0}),
        ("/api/rollouts", {"rollouts": [{"id": "g", "group_id": "a\x00b"}]}),
    ],
)
def test_a_label_holding_nul_is_a_422_naming_it_on_both_stores(api: httpx.Client, path: str, body: object) -> None:
    api.post("/api/rollouts", json={"rollouts": [{"id": "r"}]}).raise_for_status()
    response = api.post(path, json=body)
    assert response.status_code == 422 and "NUL" in response.text, response.text  # PostgreSQL answered 500 before


def test_an_event_id_holding_the_cells_prefix_and_separator_is_only_an_id(api: httpx.Client) -> None:
    api.post("/api/rollouts", json={"rollouts": [{"id": "r"}]}).raise_for_status()
    colon = api.post("/api/rollouts/r/events", json={"id": "enc1:x:y", "kind": "note", "payload": {"s": MARKER}})
    assert colon.status_code == 200, colon.text
    shown = api.get("/api/rollouts/r/events", params={"reveal": "true"}).json()["events"]
    assert [(e["id"], e["payload"]) for e in shown] == [("enc1:x:y", {"s": MARKER})]


def test_a_rollout_id_with_nul_or_a_path_is_refused_naming_the_id(api: httpx.Client) -> None:
    for bad in ("a\x00b", "../other", "a/b", "a*"):
        response = api.post("/api/rollouts", json={"rollouts": [{"id": bad}]})
        assert response.status_code == 422 and "id" in response.text, (bad, response.text)


def test_a_legacy_clear_cell_that_looks_sealed_is_read_as_text_and_sealed_by_encrypt(store_url: str) -> None:
    # Before the fix, encrypt took any cell starting enc1: as sealed: it stayed clear and every read failed.
    make_legacy_store(store_url, ["r1"], MARKER)
    lookalike = f"{PREFIX}0123456789abcdef:{MARKER}"
    engine = sa.create_engine(store_url)
    with engine.begin() as conn:
        conn.execute(sa.update(attempts).where(attempts.c.rollout_id == "r1").values(message=lookalike))
    engine.dispose()
    store = SqlStore(store_url)
    try:
        assert store.get_rollout("r1").attempts[0].message == lookalike  # mid-migration: legacy text, read as is
        seal_existing(store)
        assert MARKER not in _raw(store, attempts, "message", attempts.c.rollout_id == "r1")
        assert store.get_rollout("r1").attempts[0].message == lookalike
    finally:
        store.close()
