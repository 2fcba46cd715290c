"""One table of error types: the API, the gateway and docs/api.md say the same word for the same status."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from alight_server.http.error_types import ERROR_TYPES, error_type

if TYPE_CHECKING:
    from tests.conftest import LiveServer

API_DOC = Path(__file__).parents[3] / "docs" / "api.md"


def test_the_api_docs_table_names_the_type_each_status_gets() -> None:
    rows = re.findall(r"^\| (\d{3}(?: / \d{3})*) \| (`[a-z_]+`(?: / `[a-z_]+`)*) \|", API_DOC.read_text(), re.M)
    documented = {
        int(code): kind.strip("`")
        for codes, kinds in rows
        for code, kind in zip(codes.split(" / "), kinds.split(" / "), strict=True)
    }
    assert len(documented) >= 9, rows
    assert documented == {code: error_type(code) for code in documented}


@pytest.fixture
def attempt_token(admin_client: httpx.Client) -> str:
    admin_client.post("/api/rollouts", json={"rollouts": [{"id": "r1"}]}).raise_for_status()
    return admin_client.post("/api/attempts/claim", json={"limit": 1, "ids": ["r1"]}).json()["attempts"][0]["token"]


def test_the_api_and_the_gateway_answer_a_status_with_the_same_type(
    live_server: LiveServer, attempt_token: str
) -> None:
    chat = f"{live_server.url}/gw/r1/1/v1/chat/completions"
    bearer = {"Authorization": f"Bearer {attempt_token}", "Content-Type": "application/json"}
    admin = {**live_server.admin_headers(), "Content-Type": "application/json"}
    answers = {
        "api 400": httpx.post(f"{live_server.url}/api/rollouts", content=b"{not json", headers=admin),
        "gateway 400": httpx.post(chat, content=b"{not json", headers=bearer),
        "api 401": httpx.get(f"{live_server.url}/api/rollouts"),
        "gateway 401": httpx.post(chat, json={"model": "m", "messages": []}),
        "api 404": httpx.get(f"{live_server.url}/api/rollouts/ghost", headers=admin),
    }
    for name, response in answers.items():
        status = int(name.split()[1])
        assert response.status_code == status, (name, response.text)
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}, (name, response.text)
        assert (error["type"], error["code"]) == (ERROR_TYPES[status], status), (name, response.text)
