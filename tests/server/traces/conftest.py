"""Trace-import fixtures: the tiny model's tokenizer as the policy's renderer, the fake upstream on loopback,
and OpenAI-client conversations logged as a logging proxy writes them ({request, response} per line)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from alight_server.stacks.server_thread import ServerThread
from alight_server.traces.render import Renderer
from alight_testing import create_fake_upstream

WEATHER: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@pytest.fixture(scope="session")
def renderer() -> Renderer:
    return Renderer.for_model("tiny")


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    with ServerThread(create_fake_upstream(model="policy")) as url:
        yield url + "/v1"


def log_conversation(
    url: str, path: Path, prompt: str, *, ids: bool, tools_on_second: bool = True
) -> list[dict[str, Any]]:
    """Two calls of a real OpenAI client (a tool call, then the answer to its result), each logged as a line."""
    from openai import OpenAI

    lines: list[dict[str, Any]] = []

    def record(response: httpx.Response) -> None:
        response.read()
        lines.append({"request": json.loads(response.request.content), "response": response.json()})

    extra = {"return_token_ids": True, "logprobs": True} if ids else {}
    with httpx.Client(event_hooks={"response": [record]}) as http:
        client = OpenAI(base_url=url, api_key="sk-test", http_client=http)  # pyright: ignore[reportArgumentType]
        messages: list[Any] = [{"role": "user", "content": prompt}]
        first = client.chat.completions.create(model="policy", messages=messages, tools=[WEATHER], extra_body=extra)
        reply = first.choices[0].message
        messages.append(reply.model_dump(exclude_none=True, include={"role", "content", "tool_calls"}))
        for tool_call in reply.tool_calls or []:
            messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": "sunny, 21 C"})
        tools = [WEATHER] if tools_on_second else []
        client.chat.completions.create(model="policy", messages=messages, tools=tools or None, extra_body=extra)  # type: ignore[arg-type]
    with path.open("a") as f:
        f.writelines(json.dumps(line) + "\n" for line in lines)
    return lines


def imported_for_eval(folder: Path, upstream_url: str, prompts: list[str], scoring: str) -> str:
    """Each prompt's logged conversation imported as traces named "prod" into a store in `folder`, beside a
    config.yaml whose evaluator is `scoring` (scoring.py:score) for `alight eval --traces prod`; the store's URL."""
    from typer.testing import CliRunner

    from alight.cli import app as cli

    db = f"sqlite:///{folder / 'alight.db'}"
    logs = folder / "calls.jsonl"
    for prompt in prompts:
        log_conversation(upstream_url, logs, prompt, ids=False)
    (folder / "scoring.py").write_text(scoring)
    (folder / "tasks.jsonl").write_text(json.dumps({"prompt": "unused"}) + "\n")
    (folder / "config.yaml").write_text(
        "model: tiny\ndataset:\n  train: tasks.jsonl\nagent:\n  entrypoint: nowhere.py:main\nevaluator: scoring.py:score\n"
    )
    imported = CliRunner().invoke(
        cli, ["data", "import", str(logs), "--format", "openai", "--name", "prod", "--model", "tiny", "--db", db]
    )
    assert imported.exit_code == 0, imported.output
    return db
