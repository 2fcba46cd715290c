"""Requests captured from the real Claude Code and Codex CLIs, replayed through the gateway, streamed and not.

The bodies in cli_requests/ are what each CLI sent on its second turn (after one tool call), with only
the per-install ids zeroed: Claude Code 2.1.197 (`claude -p`, Messages with `?beta=true`, a system turn
mid-conversation, 24 tools) and Codex 0.171.0 (`codex exec`, Responses with developer messages, a
`namespace` tool group and the hosted `web_search` tool).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from alight.schemas import ApiFlavour

HERE = Path(__file__).parent / "cli_requests"
CLAUDE = json.loads((HERE / "claude_code_2.1.197_messages.json").read_text())
CODEX = json.loads((HERE / "codex_0.171.0_responses.json").read_text())
CLAUDE_HEADERS = {
    "anthropic-version": "2023-06-01",
    "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27",
    "x-app": "cli",
}


def _post(url: str, token: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(url, json=body, headers={"authorization": f"Bearer {token}", **(headers or {})}, timeout=60)


def _sse_events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ") and line != "data: [DONE]"]


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_claude_code_request_is_translated_whole_and_answered(gateway, attempt, fake, stream):
    body = {**copy.deepcopy(CLAUDE), "stream": stream}
    response = _post(f"{attempt.anthropic_base_url}/v1/messages?beta=true", attempt.token, body, CLAUDE_HEADERS)
    assert response.status_code == 200, response.text
    sent = fake.calls[-1].request
    roles = [m["role"] for m in sent["messages"]]
    # top-level system blocks, the user turn, the mid-conversation system turn, the tool call and its result
    assert roles == ["system", "user", "system", "assistant", "tool"]
    assert sent["messages"][3]["tool_calls"][0]["function"]["name"] == "Bash"
    assert sent["messages"][4]["tool_call_id"] == sent["messages"][3]["tool_calls"][0]["id"]
    assert len(sent["tools"]) == len(CLAUDE["tools"]) == 24
    # extended-thinking, context-management and effort settings have no chat equivalent: not forwarded
    assert not {"thinking", "context_management", "output_config", "metadata"} & set(sent)
    [call] = gateway.server.store.list_model_calls(attempt.rollout_id)
    produced = fake.calls[-1].response
    assert call.flavour == ApiFlavour.MESSAGES and call.streamed is stream
    assert call.prompt_token_ids == produced["prompt_token_ids"] and call.response_token_ids
    if stream:
        kinds = [e["type"] for e in _sse_events(response.text)]
        assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    else:
        message = anthropic.types.Message.model_validate(response.json())
        assert message.stop_reason in ("end_turn", "tool_use", "max_tokens")


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_codex_request_is_translated_whole_and_answered(gateway, attempt, fake, stream):
    body = {**copy.deepcopy(CODEX), "stream": stream}
    response = _post(f"{attempt.base_url}/responses", attempt.token, body)
    assert response.status_code == 200, response.text
    sent = fake.calls[-1].request
    assert [m["role"] for m in sent["messages"]] == ["system", "system", "user", "user", "assistant", "tool"]
    names = [t["function"]["name"] for t in sent["tools"]]
    functions = [t["name"] for t in CODEX["tools"] if t["type"] == "function"]
    [group] = [t for t in CODEX["tools"] if t["type"] == "namespace"]
    # plain functions as they are, the namespace's members under their own names, web_search left out
    assert names == functions + [t["name"] for t in group["tools"]]
    [call] = gateway.server.store.list_model_calls(attempt.rollout_id)
    assert call.flavour == ApiFlavour.RESPONSES and call.response_token_ids
    if stream:
        events = _sse_events(response.text)
        assert events[-1]["type"] == "response.completed"
        openai.types.responses.Response.model_validate(events[-1]["response"])
    else:
        openai.types.responses.Response.model_validate(response.json())


def _namespaced_body(text: str) -> dict[str, Any]:
    [group] = [t for t in CODEX["tools"] if t["type"] == "namespace"]
    return {"model": "policy", "input": text, "tools": [group], "stream": False}


def test_a_call_to_a_namespaced_tool_comes_back_with_its_namespace(gateway, attempt, fake):
    [group] = [t for t in CODEX["tools"] if t["type"] == "namespace"]
    member = group["tools"][0]["name"]
    response = _post(f"{attempt.base_url}/responses", attempt.token, _namespaced_body(f"call {member}"))
    assert response.status_code == 200, response.text
    [item] = [o for o in response.json()["output"] if o["type"] == "function_call"]
    assert (item["name"], item["namespace"]) == (member, group["name"])


def test_a_namespaced_call_in_the_history_reaches_the_policy_under_its_chat_name(gateway, attempt, fake):
    [group] = [t for t in CODEX["tools"] if t["type"] == "namespace"]
    member = group["tools"][0]["name"]
    body = _namespaced_body("")
    body["input"] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
        {"type": "function_call", "call_id": "c1", "name": member, "namespace": group["name"], "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "done"},
    ]
    assert _post(f"{attempt.base_url}/responses", attempt.token, body).status_code == 200
    assistant = fake.calls[-1].request["messages"][1]
    assert assistant["tool_calls"][0]["function"]["name"] == member


def test_namespace_members_that_clash_with_a_function_are_prefixed_both_ways(gateway, attempt, fake):
    [group] = [t for t in CODEX["tools"] if t["type"] == "namespace"]
    member = group["tools"][0]
    clash = {"type": "function", "name": member["name"], "parameters": {"type": "object", "properties": {}}}
    body = {**_namespaced_body(f"call {group['name']}__{member['name']}"), "tools": [clash, group]}
    response = _post(f"{attempt.base_url}/responses", attempt.token, body)
    assert response.status_code == 200, response.text
    names = [t["function"]["name"] for t in fake.calls[-1].request["tools"]]
    assert names[0] == member["name"] and f"{group['name']}__{member['name']}" in names
    [item] = [o for o in response.json()["output"] if o["type"] == "function_call"]
    assert (item["name"], item["namespace"]) == (member["name"], group["name"])


def test_an_unknown_tool_type_is_still_refused_with_a_message(gateway, attempt):
    body = {"model": "policy", "input": "hi", "tools": [{"type": "teleport"}]}
    response = _post(f"{attempt.base_url}/responses", attempt.token, body)
    assert response.status_code == 400
    assert "only function and namespace tools" in response.json()["error"]["message"]


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_a_request_longer_than_the_policy_context_is_refused_clearly_and_recorded(gateway, attempt, upstream, stream):
    if upstream.kind != "embedded":
        pytest.skip("needs a backend with a context limit (the tiny model's is 2,048 tokens)")
    body = {**copy.deepcopy(CLAUDE), "stream": stream}
    response = _post(f"{attempt.anthropic_base_url}/v1/messages?beta=true", attempt.token, body, CLAUDE_HEADERS)
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert "maximum context length is 2048 tokens" in error["error"]["message"]
    [call] = gateway.server.store.list_model_calls(attempt.rollout_id)
    assert call.status_code == 400 and "maximum context length" in (call.error or "")
    assert call.request["messages"] == CLAUDE["messages"]
