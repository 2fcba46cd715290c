"""BFCL's single-turn categories as an alight benchmark: its data, prompt and checker, run in .venv-bfcl.

`alight eval CONFIG --benchmark bfcl:simple --limit 20` asks the config's policy, through the gateway, each entry's
question the way BFCL prompts a model without native function calling (the function docs in the system prompt,
calls answered as `[f(a=1)]`), and scores the answer the gateway recorded with BFCL's own decoder and AST checker
(checker.py, in the venv `bash scripts/setup.sh --bfcl` makes). The task handed to the agent holds no ground truth,
and the score is read from the recorded model output, never from anything the agent reports.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from openai import OpenAI

CHECKER = Path(__file__).with_name("checker.py")
SIMPLE = ["simple_python", "simple_java", "simple_javascript"]
NON_LIVE = [*SIMPLE, "multiple", "parallel", "parallel_multiple", "irrelevance"]
LIVE = [f"live_{c}" for c in ("simple", "multiple", "parallel", "parallel_multiple", "irrelevance", "relevance")]
# bfcl-eval's single-turn categories (its SINGLE_TURN_CATEGORY; the checker refuses any other), and BFCL's summary
# groups: its non-live "simple" is the mean over the three languages.
CATEGORIES = {"simple": SIMPLE, "non_live": NON_LIVE, "live": LIVE, **{c: [c] for c in NON_LIVE + LIVE}}
MAX_TOKENS = 256  # an answer is one line of calls; a policy that rambles past this is wrong either way
TIMEOUT_S = 40.0  # one checker process; the server's evaluator call gives up after 50 s


def bfcl_python() -> str:
    """The .venv-bfcl interpreter: $ALIGHT_BFCL_PYTHON, else the checkout's .venv-bfcl."""
    python = os.environ.get("ALIGHT_BFCL_PYTHON") or str(Path(__file__).resolve().parents[4] / ".venv-bfcl/bin/python")
    if not Path(python).is_file():
        raise RuntimeError(f"BFCL runs in its own venv and {python} is missing: run bash scripts/setup.sh --bfcl")
    return python


def call_checker(request: dict[str, Any]) -> Any:
    """One request to checker.py in .venv-bfcl; its JSON answer."""
    done = subprocess.run([bfcl_python(), str(CHECKER)], input=json.dumps(request), capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=False)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"BFCL's checker failed ({request['op']}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


class Bfcl:
    """The `bfcl` benchmark (entry point group `alight.benchmarks`)."""

    agent = "alight_environments.bfcl.benchmark:answer"
    evaluator = "alight_environments.bfcl.benchmark:score"

    def categories(self) -> dict[str, list[str]]:
        return CATEGORIES

    def tasks(self, categories: list[str], limit: int | None) -> list[dict[str, Any]]:
        return call_checker({"op": "tasks", "categories": categories, "limit": limit})


def answer(task: dict[str, Any]) -> None:
    """The agent: BFCL's prompt to the policy, once, as BFCL's OpenAI prompting handler sends it."""
    OpenAI(max_retries=3).chat.completions.create(
        model="policy", messages=task["messages"], max_tokens=MAX_TOKENS, temperature=0.001
    )


def score(task: dict[str, Any], trajectory: Any) -> float:
    """1.0 when BFCL's checker accepts the model output the gateway recorded for this entry, else 0.0."""
    return score_answers([(task["bfcl_id"], trajectory.final_output.text)])[0]


def score_answers(answers: list[tuple[str, str]]) -> list[float]:
    """BFCL's verdict (1.0 or 0.0) on each (entry id, answer text), in one checker process."""
    verdicts = call_checker({"op": "score", "answers": [{"id": i, "answer": text} for i, text in answers]})
    return [1.0 if v["valid"] else 0.0 for v in verdicts]
