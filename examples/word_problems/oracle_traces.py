"""Oracle traces for the warm start: the example's own agent loop on TRAIN problems, its model a scripted oracle.

The oracle calls the calculator once a step, writing its second call on the first call's result as the tool
returned it, then answers. The agent (`agent.solve`) runs unchanged with a real `openai` client whose HTTP
transport is the oracle (httpx2's MockTransport), and every chat-completions request and response it exchanged
is written as one line of an OpenAI log (`{"request", "response", "task"}`), the format
`alight data import --format openai` reads (docs/traces.md). Only train problems are ever written.

    python oracle_traces.py --count 128 --out traces/oracle.jsonl
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import httpx2
from agent import score, solve  # pyright: ignore[reportImplicitRelativeImport]
from openai import OpenAI
from problems import TEMPLATES  # pyright: ignore[reportImplicitRelativeImport]

HERE = Path(__file__).resolve().parent
RESULT = re.compile(r"calculator result: (-?\d+)")


def oracle_reply(task: dict[str, Any], messages: list[dict[str, Any]]) -> str:
    """The next reply: the first step, the second on the tool's last result, then that result as the answer."""
    template, a, b, c = task["instance"]
    first, second = TEMPLATES[template].steps
    question = max(i for i, m in enumerate(messages) if m["content"] == task["question"])
    turns = messages[question + 1 :]
    if not turns:
        return f"CALL calculator({first.format(a=a, b=b)})"
    result = RESULT.fullmatch(turns[-1]["content"])
    if result is None:
        raise ValueError(f"the oracle expected a calculator result, got {turns[-1]['content']!r}")
    if len(turns) == 2:
        return f"CALL calculator({second.format(r=result.group(1), c=c)})"
    return f"ANSWER: {result.group(1)}"


def oracle_run(task: dict[str, Any]) -> tuple[list[dict[str, Any]], float]:
    """The agent's loop on one task against the oracle: (the log lines of its calls, the agent's reward)."""
    lines: list[dict[str, Any]] = []

    def handle(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        text = oracle_reply(task, body["messages"])
        response = {
            "id": f"oracle-{len(lines)}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "policy"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        }
        lines.append({"request": body, "response": response, "task": task})
        return httpx2.Response(200, json=response)

    http = httpx2.Client(transport=httpx2.MockTransport(handle))
    client = OpenAI(base_url="http://oracle.invalid/v1", api_key="unused", http_client=http)
    reply = solve(task["question"], client)
    return lines, score(reply, int(task["answer"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--count", type=int, default=128, help="train problems, from the first")
    parser.add_argument("--out", type=Path, default=HERE / "traces" / "oracle.jsonl")
    args = parser.parse_args()
    tasks = [json.loads(line) for line in (HERE / "tasks_train.jsonl").read_text().splitlines()][: args.count]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as out:
        for task in tasks:
            lines, reward = oracle_run(task)
            if reward != 1.0:
                raise SystemExit(f"the oracle failed a train problem: {task['question']}")
            out.writelines(json.dumps(line) + "\n" for line in lines)
    print(f"{len(tasks)} oracle conversations (reward 1 each) -> {args.out}")


if __name__ == "__main__":
    main()
