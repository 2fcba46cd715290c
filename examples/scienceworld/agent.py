"""ScienceWorld agent: the plain OpenAI client plays AllenAI's ScienceWorld simulator, one text command a turn.

It is an ordinary agent on the real, unmodified environment (PyPI `scienceworld`, a Scala simulator reached
over py4j, so it needs a Java runtime). `python agent.py find-living-thing 3` plays variation 3 against any
OpenAI-compatible server in OPENAI_BASE_URL. Under `alight train` or `alight eval`, `@alight.rollout` hands it
a task ({"task_name", "variation", "simplification"}) and records the returned number as the reward: the
environment's own score at the end of the episode, divided by 100 (a failed task, which ScienceWorld scores
-100, counts as 0). Each environment step is an `execute_tool` span holding the command and the observation,
so the trajectory shows what the model said and what the simulator answered, call for call.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from openai import OpenAI
from opentelemetry import trace
from scienceworld import ScienceWorldEnv

import alight
from alight import semconv

tracer = trace.get_tracer("scienceworld-agent")

MODEL = "policy"  # the gateway maps any name onto the policy being trained
MAX_STEPS = int(os.environ.get("SCIENCEWORLD_MAX_STEPS", "10"))
MAX_TOKENS = int(os.environ.get("SCIENCEWORLD_MAX_TOKENS", "16"))
MAX_COMMAND_CHARS = 120  # a command longer than any of ScienceWorld's; the model's text is never trusted to be short
SYSTEM = (
    "You are an agent in ScienceWorld, a text simulation of a house and its garden. "
    "Each turn, reply with exactly one command and nothing else, for example:\n"
    "look around\n"
    "teleport to kitchen\n"
    "pick up <thing>\n"
    "focus on <thing>\n"
    "move <thing> to <container>\n"
    "open <thing>\n"
    "You will be told what happened. Focus only on the thing the task asks for: focusing on a wrong one fails it."
)


def command(reply: str) -> str:
    """The command in a reply: its first non-empty line, without quotes or a trailing period, lower-cased."""
    line = next((ln for ln in reply.splitlines() if ln.strip()), "")
    return line.strip().strip("`\"'").rstrip(".").strip().lower()[:MAX_COMMAND_CHARS]


def step(env: ScienceWorldEnv, action: str) -> tuple[str, bool, int]:
    """One environment step as a tool span: (observation, done, score after it)."""
    with tracer.start_as_current_span(
        f"{semconv.OP_EXECUTE_TOOL} scienceworld",
        attributes={
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL,
            semconv.GEN_AI_TOOL_NAME: "scienceworld",
            semconv.GEN_AI_TOOL_CALL_ARGUMENTS: action,
        },
    ) as span:
        observation, _, done, info = env.step(action)
        span.set_attribute(semconv.GEN_AI_TOOL_CALL_RESULT, observation)
        return observation, bool(done), int(info["score"])


def play(env: ScienceWorldEnv, client: OpenAI, max_steps: int = MAX_STEPS) -> int:
    """One episode on a loaded environment: the model's command each turn, the observation back. The final score."""
    observation, info = env.reset()
    messages: list[Any] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"{env.get_task_description()}\n\n{observation}"},
    ]
    score = int(info["score"])
    for _ in range(max_steps):
        response = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=MAX_TOKENS)
        reply = response.choices[0].message.content or ""
        observation, done, score = step(env, command(reply))
        if done:
            break
        messages.append({"role": "assistant", "content": reply})
        messages.append({"role": "user", "content": observation})
    return score


def reward(score: int) -> float:
    """ScienceWorld's score (0-100 for progress, -100 for a failed task) as a reward in [0, 1]."""
    return max(0, min(score, 100)) / 100


def run_episode(task: dict[str, Any], client: OpenAI) -> int:
    env = ScienceWorldEnv("", envStepLimit=MAX_STEPS + 1)
    try:
        env.load(task["task_name"], int(task["variation"]), task.get("simplification", "easy"))
        return play(env, client)
    finally:
        env.close()


@alight.rollout
def main(task: dict[str, Any]) -> float:
    return reward(run_episode(task, OpenAI(max_retries=8)))


if __name__ == "__main__":
    name = sys.argv[1] if len(sys.argv) > 1 else "find-living-thing"
    variation = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    print("score:", run_episode({"task_name": name, "variation": variation}, OpenAI()))
