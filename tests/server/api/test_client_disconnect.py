"""A client that hangs up halfway through its request body is logged as that, not as a server error."""

from __future__ import annotations

import logging
import socket
import time
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx
import pytest

if TYPE_CHECKING:
    from tests.conftest import LiveServer


def _send_part_and_hang_up(url: str, path: str, token: str) -> None:
    where = urlsplit(url)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {where.hostname}\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
    )
    with socket.create_connection((where.hostname, where.port)) as sock:
        sock.sendall(head.encode() + b'{"resourceSpans": [')  # 19 of the 5000 bytes it announced


def test_an_otlp_export_cut_short_by_a_hang_up_is_a_client_disconnect_in_the_log(
    live_server: LiveServer, admin_client: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    admin_client.post("/api/rollouts", json={"rollouts": [{"id": "r1"}]}).raise_for_status()
    token = admin_client.post("/api/attempts/claim", json={"limit": 1, "ids": ["r1"]}).json()["attempts"][0]["token"]
    with caplog.at_level(logging.INFO, logger="alight.server"):
        _send_part_and_hang_up(live_server.url, "/v1/traces", token)
        deadline = time.monotonic() + 10
        while not any("went away" in r.getMessage() for r in caplog.records) and time.monotonic() < deadline:
            time.sleep(0.05)
    messages = [r.getMessage() for r in caplog.records if r.name == "alight.server"]
    assert any("went away while sending its request body: POST /v1/traces" in m for m in messages), messages
    assert not any("unhandled error" in m for m in messages), messages
    # Nothing was stored, and the server answers the next client.
    assert admin_client.get("/api/rollouts/r1").status_code == 200


def test_an_api_body_cut_short_is_no_server_error(
    live_server: LiveServer, admin_client: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="alight.server"):
        _send_part_and_hang_up(live_server.url, "/api/rollouts", live_server.admin_key)
        time.sleep(0.5)
    assert not any("unhandled error" in r.getMessage() for r in caplog.records)
    assert admin_client.get("/api/rollouts").json()["rollouts"] == []
