"""Test agent: its task holds the planted secrets; it reads them through a traced tool and sends them to the model."""

from __future__ import annotations

from typing import Any

from openai import OpenAI
from opentelemetry import trace

import alight
from alight import semconv


@alight.rollout
def main(task: dict[str, Any]) -> float:
    attributes = {
        semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL,
        semconv.GEN_AI_TOOL_NAME: "read_file",
        semconv.GEN_AI_TOOL_CALL_ARGUMENTS: '{"path": "deploy.env"}',
        semconv.GEN_AI_TOOL_CALL_RESULT: task["settings"],
    }
    with trace.get_tracer("secret-agent").start_as_current_span("execute_tool read_file", attributes=attributes):
        settings = task["settings"]
    client = OpenAI(max_retries=2)
    messages: list[Any] = [{"role": "user", "content": f"Deploy with these settings:\n{settings}"}]
    client.chat.completions.create(model="policy", messages=messages, max_tokens=32)
    return 1.0
