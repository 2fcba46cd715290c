"""The API's copies for people: trajectory, events and dashboard routes redact unless the admin asks `reveal=true`;
what the trainer reads, and so the training rows, stay exact."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import httpx
import pytest

from alight.client import AlightClient
from alight.schemas import RolloutCreate
from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_server.trainer.step.samples import SampleConfig, build_samples
from alight_server.trajectories.join import build_trajectory
from tests.conftest import ADMIN_KEY
from tests.server.redaction.planted import SECRETS, leaked
from tests.server.redaction.planted_rollout import CLEAN, ROLLOUT, TOOL_CALL_ID, plant_run

if TYPE_CHECKING:
    from tests.conftest import LiveServer


@pytest.fixture
def planted(live_server: LiveServer) -> LiveServer:
    plant_run(live_server.store)
    return live_server


def _get(server: LiveServer, path: str, **params: str) -> httpx.Response:
    response = httpx.get(server.url + path, params=params, headers=server.admin_headers(), timeout=60)
    response.raise_for_status()
    return response


def test_the_trajectory_api_hides_every_planted_secret_by_default(planted: LiveServer) -> None:
    body = _get(planted, f"/api/rollouts/{ROLLOUT}/trajectory").text
    assert leaked(body) == []
    for kind in ("aws_access_key", "private_key", "json_web_token", "email", "phone", "card", "employee_id"):
        assert f"[REDACTED:{kind}]" in body, kind


def test_a_redacted_call_carries_the_flag_and_no_token_ids(planted: LiveServer) -> None:
    trajectory = json.loads(_get(planted, f"/api/rollouts/{ROLLOUT}/trajectory").text)
    for joined in trajectory["calls"]:
        call = joined["call"]
        assert "redacted" in call["flags"]
        assert call["prompt_token_ids"] == [] and call["response_token_ids"] == [] and call["response_logprobs"] == []
    (tool,) = trajectory["tool_spans"]
    assert leaked(json.dumps(tool)) == [] and tool["span_id"] == "00f067aa0ba902b7"  # ids stay


def test_reveal_true_answers_the_exact_trajectory_as_stored(planted: LiveServer) -> None:
    exact = json.loads(_get(planted, f"/api/rollouts/{ROLLOUT}/trajectory", reveal="true").text)
    assert exact == build_trajectory(planted.store, ROLLOUT).model_dump(mode="json")
    assert set(leaked(json.dumps(exact))) == set(SECRETS)


def test_an_attempt_token_can_neither_read_nor_reveal_a_trajectory(planted: LiveServer) -> None:
    planted.store.create_rollouts([RolloutCreate(id="other")])
    with httpx.Client(base_url=planted.url, headers=planted.admin_headers()) as admin:
        token = admin.post("/api/attempts/claim", json={"limit": 1, "ids": ["other"]}).json()["attempts"][0]["token"]
    for params in ({}, {"reveal": "true"}):
        response = httpx.get(
            f"{planted.url}/api/rollouts/{ROLLOUT}/trajectory",
            params=params,
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status_code == 403 and leaked(response.text) == []


def test_a_malformed_reveal_is_a_422_naming_the_parameter(planted: LiveServer) -> None:
    response = httpx.get(
        f"{planted.url}/api/rollouts/{ROLLOUT}/trajectory", params={"reveal": "maybe"}, headers=planted.admin_headers()
    )
    assert response.status_code == 422 and "reveal" in response.text and leaked(response.text) == []


def test_the_events_api_hides_the_log_line_unless_revealed(planted: LiveServer) -> None:
    redacted = _get(planted, f"/api/rollouts/{ROLLOUT}/events", kind="log").text
    assert leaked(redacted) == [] and "[REDACTED:openai_token]" in redacted
    exact = _get(planted, f"/api/rollouts/{ROLLOUT}/events", kind="log", reveal="true").text
    assert set(leaked(exact)) == set(SECRETS)


def test_the_dashboard_view_hides_task_prompt_tool_result_and_log(planted: LiveServer) -> None:
    view = _get(planted, f"/api/ui/rollouts/{ROLLOUT}/view").json()
    assert view["redacted"] is True
    for part in ("rollout", "trajectory", "log"):
        assert leaked(json.dumps(view[part])) == [], part
    assert "[REDACTED:private_key]" in view["log"]
    revealed = _get(planted, f"/api/ui/rollouts/{ROLLOUT}/view", reveal="true").json()
    assert revealed["redacted"] is False and set(leaked(revealed["log"])) == set(SECRETS)


def test_the_token_view_shows_each_secret_as_one_block_and_hides_its_ids(planted: LiveServer) -> None:
    view = _get(planted, f"/api/ui/rollouts/{ROLLOUT}/tokens").json()
    exact = _get(planted, f"/api/ui/rollouts/{ROLLOUT}/tokens", reveal="true").json()
    assert view["decoded"] and view["redacted"]
    (row,), (exact_row,) = view["rows"], exact["rows"]
    text = "".join(t[1] for t in row["tokens"])
    assert leaked(text) == []
    blocks = [t for t in row["tokens"] if len(t) == 5]
    assert {b[1] for b in blocks} >= {"[REDACTED:private_key]", "[REDACTED:card]", "[REDACTED:employee_id]"}
    assert all(b[0] is None for b in blocks) and sum(b[4] for b in blocks) + len(row["tokens"]) - len(blocks) == len(
        exact_row["tokens"]
    )
    shown_ids = {t[0] for t in row["tokens"] if t[0] is not None}
    hidden = [t[0] for t in exact_row["tokens"] if t[0] not in shown_ids]
    assert hidden, "the blocks' token ids are not in the redacted row"
    assert row["length"] == len(exact_row["tokens"]) and row["trained_tokens"] == exact_row["trained_tokens"]
    assert set(leaked("".join(t[1] for t in exact_row["tokens"]))) == set(SECRETS)


def test_the_trainers_read_and_the_training_rows_are_unchanged_by_redaction(planted: LiveServer) -> None:
    stored = [c.model_dump() for c in planted.store.list_model_calls(ROLLOUT)]
    before = build_samples([build_trajectory(planted.store, ROLLOUT)], SampleConfig())[0]
    for path in (f"/api/rollouts/{ROLLOUT}/trajectory", f"/api/ui/rollouts/{ROLLOUT}/view"):
        _get(planted, path)  # people read redacted copies first
    with AlightClient(planted.url, planted.admin_key) as client:
        read = client.trajectory(ROLLOUT, reveal=True)  # what trainer/run/rollouts.py reads
    after = build_samples([read], SampleConfig())[0]
    assert [c.model_dump() for c in planted.store.list_model_calls(ROLLOUT)] == stored
    assert after.input_ids.tolist() == before.input_ids.tolist()
    assert after.loss_mask.tolist() == before.loss_mask.tolist()
    assert after.old_logprobs.tolist() == before.old_logprobs.tolist()
    assert after.num_rows == 1 and int(after.loss_mask.sum()) > 0


def test_a_realistic_trajectory_without_secrets_is_served_unchanged(planted: LiveServer) -> None:
    redacted = json.loads(_get(planted, f"/api/rollouts/{CLEAN}/trajectory").text)
    exact = json.loads(_get(planted, f"/api/rollouts/{CLEAN}/trajectory", reveal="true").text)
    assert redacted == exact and "redacted" not in json.dumps([c["call"]["flags"] for c in redacted["calls"]])
    assert TOOL_CALL_ID in json.dumps(redacted)  # a tool call's random-looking id is an id, not a secret


def test_the_operator_pattern_comes_from_the_servers_config(planted: LiveServer) -> None:
    assert SECRETS["employee_id"] not in _get(planted, f"/api/rollouts/{ROLLOUT}/trajectory").text
    config = ServerConfig(admin_key=ADMIN_KEY, db_url=planted.config.db_url, port=free_port())  # no patterns
    with ServerThread(create_app(config, store=planted.store), port=config.port) as url:
        response = httpx.get(f"{url}/api/rollouts/{ROLLOUT}/trajectory", headers=planted.admin_headers(), timeout=60)
    assert leaked(response.text) == ["employee_id"]
