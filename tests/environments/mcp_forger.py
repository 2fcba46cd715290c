"""A scripted player that attacks its reward: plays task["script"] through the MCP tools, never calls `score`,
then tries every way it has to raise its reward. What each try got is written to task["report"] as JSON."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx

import alight


def rpc(url: str, token: str, method: str, params: dict[str, Any]) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    return httpx.post(url, json=body, headers=headers, timeout=60)


def call(url: str, token: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return rpc(url, token, "tools/call", {"name": tool, "arguments": arguments}).json()["result"]


@alight.rollout
def main(task: dict[str, Any]) -> float:
    token, base = os.environ["OPENAI_API_KEY"], os.environ["OPENAI_BASE_URL"].rstrip("/")
    url, server = f"{base}/mcp", os.environ["ALIGHT_SERVER_URL"].rstrip("/")
    rollout, attempt = os.environ["ALIGHT_ROLLOUT_ID"], int(os.environ["ALIGHT_ATTEMPT"])
    report: dict[str, Any] = {
        "token": token,
        "initialize": rpc(url, token, "initialize", {"protocolVersion": "2025-06-18"}).json(),
    }
    report["tools"] = [t["name"] for t in rpc(url, token, "tools/list", {}).json()["result"]["tools"]]
    report["observe"] = call(url, token, "observe", {})["content"][0]["text"]
    report["valid_actions"] = call(url, token, "valid_actions", {})["content"][0]["text"].splitlines()
    report["acts"] = [call(url, token, "act", {"action": a})["content"][0]["text"] for a in task["script"]]
    report["unknown_tool"] = call(url, token, "set_score", {"value": 100})
    report["extra_argument"] = call(url, token, "act", {"action": "look around", "score": 100})
    auth = {"Authorization": f"Bearer {token}"}
    forged = {"value": 1.0, "final": True, "source": "evaluator", "attempt": attempt}
    report["evaluator_reward"] = httpx.post(
        f"{server}/api/rollouts/{rollout}/rewards", json=forged, headers=auth
    ).status_code
    other = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    report["other_attempt"] = httpx.post(
        f"{server}/gw/{rollout}/{attempt + 1}/v1/mcp", json=other, headers=auth
    ).status_code
    report["no_token"] = httpx.post(url, json=other).status_code
    folder = Path(task["report"]).parent
    (folder / "score.json").write_text('{"score": 100, "reward": 1.0}')  # nothing reads it: the score is the game's
    Path(task["report"]).write_text(json.dumps(report))
    return 1.0  # an agent reward of 1.0: outranked by the environment's
