"""Content cells at rest (store/keys/sealing.py), on SQLite and PostgreSQL: sealed, bound to their row, refused when moved or
altered, and answered by the API without a 500."""

from __future__ import annotations

import base64
import uuid

import httpx
import pytest
import sqlalchemy as sa
from sealing_testkit import raw_bytes, write_content

from alight.schemas import Event, Rollout, RolloutCreate
from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_server.store.base import SealError
from alight_server.store.keys.sealing import PREFIX, sealed_columns
from alight_server.store.sql import SqlStore
from alight_server.store.tables import attempts, events, model_calls, rollouts, runs, spans

MARKER = "sealing-marker-" + uuid.uuid4().hex
CONTENT_TABLES = (model_calls, spans, events, rollouts, attempts, runs)


def _cells(store: SqlStore, table: sa.Table) -> list[dict[str, object]]:
    with store.engine.connect() as conn:
        return [dict(row._mapping) for row in conn.execute(sa.select(table))]


def _set(store: SqlStore, table: sa.Table, where: sa.ColumnElement[bool], **values: object) -> None:
    with store.engine.begin() as conn:
        assert conn.execute(sa.update(table).where(where).values(**values)).rowcount == 1


def test_every_content_cell_is_stored_sealed_and_read_back_exactly(any_store: SqlStore) -> None:
    write_content(any_store, "r1", MARKER)
    for table in CONTENT_TABLES:
        for row in _cells(any_store, table):
            for column in sealed_columns(table):
                assert row[column] is None or str(row[column]).startswith(PREFIX), (table.name, column)
    assert MARKER.encode() not in raw_bytes(any_store.url)
    rollout: Rollout = any_store.get_rollout("r1")
    assert rollout.task == {"q": MARKER} and rollout.metadata == {"note": MARKER}
    assert rollout.attempts[0].message == MARKER
    [call] = any_store.list_model_calls("r1")
    assert call.request == {"messages": [{"content": MARKER}]} and call.error == MARKER
    assert (call.prompt_token_ids, call.response_token_ids, call.response_logprobs) == (
        [1, 2, 3],
        [4, 5],
        [-0.5, -0.25],
    )
    [span] = any_store.list_spans("r1")
    assert (span.name, span.attributes, span.status_message) == (f"tool {MARKER}", {"tool.result": MARKER}, MARKER)
    [event] = any_store.list_events("r1")
    assert event.payload == {"evidence": MARKER}
    assert any_store.get_run("run-r1").config == {"system_prompt": MARKER}


def _copy_r1s_cell_to_r2(store: SqlStore, table: sa.Table, column: str) -> None:
    """Two rollouts' content written, then r1's sealed `column` of `table` pasted over r2's, as someone with the
    database could."""
    write_content(store, "r1", MARKER)
    write_content(store, "r2", "another")
    [theirs] = [row for row in _cells(store, table) if row["rollout_id"] == "r1"]
    _set(store, table, table.c.rollout_id == "r2", **{column: theirs[column]})


def test_a_cell_copied_to_another_row_is_refused_naming_the_row(any_store: SqlStore) -> None:
    _copy_r1s_cell_to_r2(any_store, model_calls, "request")
    with pytest.raises(SealError, match=r"model_calls row id='r2-c' column request.*copied from another row"):
        any_store.list_model_calls("r2")
    assert [m.id for m in any_store.list_model_calls("r1")] == ["r1-c"]  # the row it came from still opens


def test_an_event_payload_copied_to_another_event_is_refused(any_store: SqlStore) -> None:
    _copy_r1s_cell_to_r2(any_store, events, "payload")
    with pytest.raises(SealError, match=r"events row rollout_id='r2', id='[0-9a-f]+' column payload"):
        any_store.list_events("r2")


def test_a_cell_moved_to_another_column_of_its_row_is_refused(any_store: SqlStore) -> None:
    write_content(any_store, "r1", MARKER)
    [row] = _cells(any_store, rollouts)
    _set(any_store, rollouts, rollouts.c.id == "r1", task=row["metadata"])
    with pytest.raises(SealError, match=r"rollouts row id='r1' column task"):
        any_store.get_rollout("r1")


def test_a_cell_with_one_byte_flipped_is_refused(any_store: SqlStore) -> None:
    write_content(any_store, "r1", MARKER)
    [row] = _cells(any_store, spans)
    head, _, body = str(row["attributes"]).rpartition(":")
    raw = bytearray(base64.b64decode(body))
    raw[20] ^= 0x01
    _set(any_store, spans, spans.c.rollout_id == "r1", attributes=f"{head}:{base64.b64encode(bytes(raw)).decode()}")
    with pytest.raises(SealError, match=r"spans row rollout_id='r1', attempt=1, .* column attributes.*altered"):
        any_store.list_spans("r1")


def test_a_cell_naming_an_unknown_data_key_is_refused_naming_the_row_and_key(any_store: SqlStore) -> None:
    write_content(any_store, "r1", MARKER)
    [row] = _cells(any_store, runs)
    forged = str(row["config"]).replace(str(row["config"]).split(":")[1], "0123456789abcdef", 1)
    _set(any_store, runs, runs.c.id == "run-r1", config=forged)
    with pytest.raises(SealError, match=r"runs row id='run-r1' column config.*'0123456789abcdef'"):
        any_store.get_run("run-r1")


def test_clear_text_written_into_a_sealed_store_is_refused(any_store: SqlStore) -> None:
    write_content(any_store, "r1", MARKER)
    _set(any_store, attempts, attempts.c.rollout_id == "r1", message="forged by someone with the database")
    with pytest.raises(SealError, match=r"attempts row rollout_id='r1', attempt=1 column message holds clear text"):
        any_store.get_rollout("r1")


def test_the_api_answers_a_tampered_row_with_the_row_named_not_a_500(any_store: SqlStore) -> None:
    config = ServerConfig(admin_key="alk_sealing-test", db_url=any_store.url, port=free_port())
    app = create_app(config, store=any_store)
    write_content(any_store, "r1", MARKER)
    write_content(any_store, "r2", "another")
    [theirs] = [row for row in _cells(any_store, model_calls) if row["id"] == "r1-c"]
    _set(any_store, model_calls, model_calls.c.id == "r2-c", response=theirs["response"])
    with ServerThread(app, port=config.port) as url:
        answer = httpx.get(
            f"{url}/api/rollouts/r2/trajectory",
            params={"reveal": "true"},
            headers={"Authorization": f"Bearer {config.admin_key}"},
            timeout=30,
        )
        page = httpx.get(
            f"{url}/api/ui/rollouts/r2/view", headers={"Authorization": f"Bearer {config.admin_key}"}, timeout=30
        )
        fine = httpx.get(
            f"{url}/api/rollouts/r1/trajectory",
            params={"reveal": "true"},
            headers={"Authorization": f"Bearer {config.admin_key}"},
            timeout=30,
        )
    assert answer.status_code == 503, answer.text  # the store cannot serve this row (StoreError), not a bug
    assert "model_calls row id='r2-c' column response" in answer.text
    assert page.status_code == 503 and "model_calls row id='r2-c' column response" in page.text  # the dashboard's
    assert fine.status_code == 200, fine.text


def test_reading_a_sealed_table_without_the_sealer_is_a_programming_error() -> None:
    from alight_server.store import rows

    with pytest.raises(TypeError, match="sealed columns"):
        rows.from_row(Event, events, {"id": "e", "rollout_id": "r", "payload": "{}"})


def test_a_claimed_rollout_whose_task_does_not_open_fails_as_infra_naming_the_row_and_the_others_start(
    any_store: SqlStore,
) -> None:
    any_store.create_rollouts([RolloutCreate(id="a", task={"q": 1}), RolloutCreate(id="b", task={"q": 2})])
    [theirs] = [row for row in _cells(any_store, rollouts) if row["id"] == "a"]
    _set(any_store, rollouts, rollouts.c.id == "b", task=theirs["task"])
    assert [(r.id, r.task) for r, _ in any_store.claim_attempts(5)] == [("a", {"q": 1})]
    [failed] = [row for row in _cells(any_store, attempts) if row["rollout_id"] == "b"]
    assert (failed["status"], failed["failure_kind"]) == ("failed", "infra")
    message = any_store.sealer.open_cell(attempts, ("b", 1), "message", str(failed["message"]))
    assert "rollouts row id='b' column task" in message
