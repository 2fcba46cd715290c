"""A hand-rolled tool-calling agent on the plain `openai` client, under @alight.rollout.

It reads nothing from alight except the task: the client finds the gateway in
OPENAI_BASE_URL / OPENAI_API_KEY like any OpenAI program would.
"""

from __future__ import annotations

import json

from openai import OpenAI
from opentelemetry import trace

import alight
from alight import semconv

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
        },
    }
]
tracer = trace.get_tracer("openai-tool-agent")


def add(a: float, b: float) -> float:
    return a + b


@alight.rollout
def main(task: dict) -> float:
    client = OpenAI()
    messages: list[dict] = [{"role": "user", "content": task["question"]}]
    results: list[float] = []
    agent_attrs = {semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT, semconv.GEN_AI_AGENT_NAME: "calculator"}
    with tracer.start_as_current_span("invoke_agent calculator", attributes=agent_attrs):
        for turn in range(4):
            with tracer.start_as_current_span(f"turn {turn}"):
                response = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
                message = response.choices[0].message
                if message.tool_calls:
                    alight.reward(0.1, name="used_tool")  # a step reward: scores this turn's call
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                break
            for tool_call in message.tool_calls:
                attrs = {
                    semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL,
                    semconv.GEN_AI_TOOL_NAME: tool_call.function.name,
                    semconv.GEN_AI_TOOL_CALL_ID: tool_call.id,
                    semconv.GEN_AI_TOOL_CALL_ARGUMENTS: tool_call.function.arguments,
                }
                with tracer.start_as_current_span(f"execute_tool {tool_call.function.name}", attributes=attrs) as span:
                    result = add(**json.loads(tool_call.function.arguments))
                    span.set_attribute(semconv.GEN_AI_TOOL_CALL_RESULT, str(result))
                results.append(result)
                messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": str(result)})
    print(f"tool results: {results}")  # agents print; `alight run --json` keeps stdout for the JSON
    return 1.0 if task["answer"] in results else 0.0
