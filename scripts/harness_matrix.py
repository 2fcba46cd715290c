"""Run the harness-matrix tests and write their results into docs/integrations.md's table.

    .venv/bin/python scripts/harness_matrix.py            # runs `pytest -m harness`, rewrites docs/integrations.md
    .venv/bin/python scripts/harness_matrix.py --check    # exits 1 if the table in docs/integrations.md is out of date
    .venv/bin/python scripts/harness_matrix.py --last     # rewrites it from the last run's results, no tests

The last run's results (.alight/harness-matrix.json) are written by this script's own run and by the whole
suite's (scripts/test.sh sets ALIGHT_HARNESS_MATRIX to that file, then runs `--check --last` after pytest, so a
matrix cell the suite no longer earns fails the test command).

Each cell is a test marked `@pytest.mark.harness(harness=..., api=..., streamed=..., tools=...)` that
asserts exact token-id capture of every call the harness made (calls counted at the upstream and in
the store) and a valid answer at the harness. Cells no test can fill say why, below.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MATRIX_DOC = ROOT / "docs" / "integrations.md"
START, END = "<!-- harness-matrix:start -->", "<!-- harness-matrix:end -->"
APIS = ("chat", "completions", "responses", "messages")
# (harness, api, streamed, tools) -> why that cell cannot exist
CANNOT = {
    ("Claude Code", "messages", False, False): "the CLI always sends its tools and streams",
    ("Claude Code", "messages", True, False): "the CLI always sends its tools",
    ("Claude Code", "messages", False, True): "the CLI always streams",
    ("Codex", "responses", False, False): "the CLI always sends its tools and streams",
    ("Codex", "responses", True, False): "the CLI always sends its tools",
    ("Codex", "responses", False, True): "the CLI always streams",
}
ORDER = [
    "openai client",
    "anthropic client",
    "OpenAI Agents SDK",
    "LangChain / LangGraph",
    "AutoGen AgentChat",
    "MCP tools (openai client loop)",
    "Claude Code",
    "Codex",
    "mini-swe-agent (coding example)",
]
LAST = ROOT / ".alight" / "harness-matrix.json"


def run_tests() -> list[dict[str, object]]:
    LAST.parent.mkdir(exist_ok=True)
    LAST.unlink(missing_ok=True)
    env = {**os.environ, "ALIGHT_HARNESS_MATRIX": str(LAST), "ALIGHT_TEST_GATEWAY_EMBEDDED": "0"}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "harness"], env=env, cwd=ROOT)
    return json.loads(LAST.read_text()) if LAST.exists() else []


def last_results() -> list[dict[str, object]]:
    if not LAST.exists():
        raise SystemExit(f"no harness results at {LAST}: run `bash scripts/test.sh` or scripts/harness_matrix.py first")
    return json.loads(LAST.read_text())


def render(results: list[dict[str, object]]) -> str:
    cells: dict[tuple[str, str, bool, bool], list[str]] = {}
    for r in results:
        key = (str(r["harness"]), str(r["api"]), bool(r["streamed"]), bool(r["tools"]))
        cells.setdefault(key, []).append(str(r["outcome"]))
    for key in CANNOT:
        cells.setdefault(key, [])
    seen = {k[0] for k in cells}
    harnesses = [h for h in ORDER if h in seen] + sorted(seen - set(ORDER))
    lines = [
        "| harness | API | plain | streamed | tools | streamed + tools |",
        "|---|---|---|---|---|---|",
    ]
    for harness in harnesses:
        for api in APIS:
            row = [
                cells.get((harness, api, s, t)) for s, t in ((False, False), (True, False), (False, True), (True, True))
            ]
            if all(c is None for c in row):
                continue
            marks = []
            for (s, t), outcomes in zip(((False, False), (True, False), (False, True), (True, True)), row, strict=True):
                if (harness, api, s, t) in CANNOT:
                    marks.append(f"n/a: {CANNOT[(harness, api, s, t)]}")
                elif not outcomes:
                    marks.append("—")
                elif "failed" in outcomes:
                    marks.append("FAILED")
                elif "passed" in outcomes:
                    marks.append("✓")
                else:
                    marks.append("skipped")
            lines.append(f"| {harness} | {api} | " + " | ".join(marks) + " |")
    lines.append("")
    lines.append("✓: the cell's tests passed; —: no test drives that combination yet; n/a: cannot happen, and why.")
    return "\n".join(lines)


def main() -> int:
    table = render(last_results() if "--last" in sys.argv else run_tests())
    text = MATRIX_DOC.read_text()
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    updated = f"{head}{START}\n{table}\n{END}{tail}"
    if "--check" in sys.argv:
        if updated != text:
            print(
                "docs/integrations.md's harness matrix differs from the tests' results (doc -, results +):",
                file=sys.stderr,
            )
            diff = difflib.unified_diff(
                text.splitlines(), updated.splitlines(), "docs/integrations.md", "results", n=0, lineterm=""
            )
            print("\n".join(diff), file=sys.stderr)
            print("fix the failing cells, or rewrite the table: scripts/harness_matrix.py --last", file=sys.stderr)
            return 1
        return 0
    MATRIX_DOC.write_text(updated)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
