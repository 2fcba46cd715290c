"""Dashboard test agent: two model calls around a traced tool (arguments and result), a step reward, a log line,
then a side-model call the run leaves out of training (`samples.exclude_models`, as Claude Code's titles are)."""

from __future__ import annotations

from typing import Any

from openai import OpenAI
from opentelemetry import trace

import alight
from alight import semconv

SIDE_MODEL = "side-haiku"
GLOSSARY = {"apple": "a fruit", "river": "flowing water", "stone": "a hard rock"}


def lookup(word: str) -> str:
    result = GLOSSARY.get(word, "unknown")
    attributes = {
        semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL,
        semconv.GEN_AI_TOOL_NAME: "lookup",
        semconv.GEN_AI_TOOL_CALL_ARGUMENTS: f'{{"word": "{word}"}}',
        semconv.GEN_AI_TOOL_CALL_RESULT: result,
    }
    with trace.get_tracer("dash-agent").start_as_current_span(
        f"{semconv.OP_EXECUTE_TOOL} lookup", attributes=attributes
    ):
        return result


@alight.rollout
def main(task: dict[str, Any]) -> float:
    client = OpenAI(max_retries=10)
    print(f"dash agent: defining {task['word']}", flush=True)
    messages: list[Any] = [{"role": "user", "content": f"Define {task['word']}."}]
    first = client.chat.completions.create(model="policy", messages=messages, max_tokens=4)
    messages.append({"role": "assistant", "content": first.choices[0].message.content or ""})
    alight.reward(0.5, name="first_call")  # a step reward on the agent's span
    messages.append({"role": "user", "content": f"lookup result: {lookup(task['word'])}"})
    second = client.chat.completions.create(model="policy", messages=messages, max_tokens=6)
    text = second.choices[0].message.content or ""
    title: list[Any] = [{"role": "user", "content": f"A title for: {text}"}]
    client.chat.completions.create(model=SIDE_MODEL, messages=title, max_tokens=2)
    letters = [c for c in text if c.isalpha()]
    return sum(c in "aeiou" for c in letters) / len(letters) if letters else 0.0
