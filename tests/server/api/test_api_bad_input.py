"""Bad input gets a 4xx whose message names the problem; nothing a client sends is a 500."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import pytest

from alight_server.app import create_app
from alight_server.stacks.server_thread import ServerThread

if TYPE_CHECKING:
    from tests.conftest import LiveServer
    from tests.server.api.conftest import Create

JSON = {"Content-Type": "application/json"}


def _error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()["error"]
    assert set(body) == {"message", "type", "param", "code"} and body["code"] == status
    return body["message"]


def test_malformed_json_is_400(admin_client: httpx.Client) -> None:
    message = _error(admin_client.post("/api/rollouts", content=b'{"rollouts": [', headers=JSON), 400)
    assert message.startswith("malformed JSON")


def test_a_body_that_is_not_json_is_named(admin_client: httpx.Client) -> None:
    message = _error(admin_client.post("/api/rollouts", content=b"rollouts=1"), 422)
    assert "JSON object" in message


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"rollouts": [{"timeout_s": "soon"}]}, "body.rollouts.0.timeout_s"),
        ({"rollouts": [{"max_attempts": 0}]}, "body.rollouts.0.max_attempts: Input should be greater than or equal"),
        ({"rollouts": [{"mode": "eval"}]}, "body.rollouts.0.mode"),
        ({"rollouts": [{"id": "has space"}]}, "body.rollouts.0.id"),
        ({"rollouts": []}, "body.rollouts"),
        ({"rollouts": [{"colour": "red"}]}, "body.rollouts.0.colour: Extra inputs are not permitted"),
        ({"rollouts": [{}], "extra": 1}, "body.extra: Extra inputs are not permitted"),
        ([], "body"),
    ],
)
def test_wrong_types_and_unknown_fields_name_the_field(admin_client: httpx.Client, body: Any, expected: str) -> None:
    assert expected in _error(admin_client.post("/api/rollouts", json=body), 422)


def test_bad_query_parameters_name_the_parameter(admin_client: httpx.Client) -> None:
    assert "query.limit" in _error(admin_client.get("/api/rollouts", params={"limit": 0}), 422)
    assert "query.state.0" in _error(admin_client.get("/api/rollouts", params={"state": "done"}), 422)
    assert "query.since_seq" in _error(admin_client.get("/api/rollouts", params={"since_seq": "x"}), 422)


def test_unknown_ids_are_404_with_the_id(admin_client: httpx.Client) -> None:
    assert "'ghost'" in _error(admin_client.get("/api/rollouts/ghost"), 404)
    assert "'ghost'" in _error(admin_client.post("/api/rollouts/ghost/cancel"), 404)
    assert "'ghost'" in _error(admin_client.post("/api/rollouts/ghost/events", json={"kind": "log"}), 404)
    finish = admin_client.post("/api/rollouts/ghost/attempts/1/finish", json={"status": "succeeded"})
    assert "'ghost'" in _error(finish, 404)


def test_unknown_attempt_numbers_are_404_and_bad_ones_422(admin_client: httpx.Client, create: Create) -> None:
    create({"id": "r"})
    assert "no attempt 3" in _error(
        admin_client.post("/api/rollouts/r/attempts/3/handle", json={"runner_handle": "h"}), 404
    )
    assert "path.attempt" in _error(
        admin_client.post("/api/rollouts/r/attempts/0/finish", json={"status": "failed"}), 422
    )
    assert "path.attempt" in _error(
        admin_client.post("/api/rollouts/r/attempts/x/finish", json={"status": "failed"}), 422
    )


def test_illegal_transitions_are_409(admin_client: httpx.Client, create: Create) -> None:
    create({"id": "r"})
    admin_client.post("/api/rollouts/r/cancel")
    assert "cancelled to running" in _error(admin_client.post("/api/rollouts/r/status", json={"state": "running"}), 409)


def test_unknown_routes_and_methods_are_json_4xx(admin_client: httpx.Client) -> None:
    assert "no route GET /api/nothing" in _error(admin_client.get("/api/nothing"), 404)
    assert "DELETE is not allowed" in _error(admin_client.delete("/api/rollouts"), 405)


def test_oversize_bodies_are_413_before_the_route_reads_them(live_server: LiveServer) -> None:
    config = live_server.config.model_copy(update={"max_body_bytes": 1000})
    app = create_app(config, store=live_server.store)
    headers = {"Authorization": f"Bearer {live_server.admin_key}", **JSON}
    big = b'{"rollouts": [{"task": "' + b"x" * 2000 + b'"}]}'
    with ServerThread(app) as url, httpx.Client(base_url=url, headers=headers) as client:
        assert "limit of 1000 bytes" in _error(client.post("/api/rollouts", content=big), 413)

        def chunks() -> Any:
            yield big[:600]
            yield big[600:]

        assert "limit of 1000 bytes" in _error(client.post("/api/rollouts", content=chunks()), 413)
        small = b'{"rollouts": [{"task": "ok"}]}'

        def small_chunks() -> Any:
            yield small[:10]
            yield small[10:]

        assert client.post("/api/rollouts", content=small_chunks()).status_code == 200


def test_nan_inside_task_json_is_422_and_huge_integers_are_kept(admin_client: httpx.Client) -> None:
    nan = admin_client.post("/api/rollouts", content=b'{"rollouts": [{"task": {"x": NaN}}]}', headers=JSON)
    assert "task holds NaN or an infinity" in _error(nan, 422)
    big = 2**80
    created = admin_client.post("/api/rollouts", json={"rollouts": [{"id": "big", "task": {"n": big}}]})
    assert created.status_code == 200 and created.json()["rollouts"][0]["task"] == {"n": big}
