"""Coding agent: the unmodified mini-swe-agent on one generated bug-fix task, in a bubblewrap sandbox.

One rollout = one episode:
1. the task's buggy checkout is built from its project's pristine sdist (sources.py) and copied into a
   fresh session (alight_sandbox.guards.prepare_episode: no .git, the failing tests' files hidden, canary planted);
2. `mini` (from .venv-coding, as installed from PyPI) runs with mini.yaml plus two `-c` specs that make its
   bubblewrap environment call `python -m alight_sandbox.guards.launch SESSION`: every action runs sandboxed and
   traced, while mini itself (outside the sandbox) reaches the gateway through OPENAI_BASE_URL;
3. the gates, the tests and the differential check against the original decide the reward
   (alight_sandbox.guards.grade_episode), recorded with report_grade.

`python agent.py TASKS.jsonl [INDEX]` runs one task against any OpenAI-compatible OPENAI_BASE_URL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from recording import task_reference  # noqa: E402
from sources import buggy_checkout  # noqa: E402

import alight  # noqa: E402
from alight_sandbox.guards import grade_episode, prepare_episode, report_grade, require_tools  # noqa: E402
from alight_sandbox.guards.policy import bounds_from_env  # noqa: E402

VENV = Path(os.environ.get("CODING_VENV", HERE.parent.parent / ".venv-coding"))
MINI_CONFIG = Path(os.environ.get("CODING_MINI_CONFIG", HERE / "mini.yaml"))
STEP_TIMEOUT_S = float(os.environ.get("CODING_COMMAND_TIMEOUT_S", "120"))
EPISODE_TIMEOUT_S = float(os.environ.get("CODING_EPISODE_TIMEOUT_S", "1500"))
# Overrides of mini.yaml for short runs (the wiring test on the tiny model): mini's own `-c key=value` specs.
OVERRIDES = {"agent.step_limit": "CODING_STEP_LIMIT", "model.model_kwargs.max_tokens": "CODING_MAX_TOKENS"}


def mini_argv(session: Path, task: dict[str, Any], output: Path) -> list[str]:
    """The `mini` command line: its own config, then per-episode specs for its bubblewrap environment."""
    launcher = ["-m", "alight_sandbox.guards.launch", str(session)]
    overrides = [
        arg for key, var in OVERRIDES.items() if var in os.environ for arg in ("-c", f"{key}={os.environ[var]}")
    ]
    return [
        str(VENV / "bin" / "mini"),
        "-c",
        str(MINI_CONFIG),
        "-c",
        f"environment.executable={sys.executable}",
        "-c",
        f"environment.wrapper_args={json.dumps(launcher)}",
        *overrides,
        "--task",
        task["problem_statement"],
        "--yolo",
        "--exit-immediately",
        "--output",
        str(output),
    ]


def mini_env(workdir: Path) -> dict[str, str]:
    """This process's environment (the gateway URL and key the controller set) plus mini's quiet settings."""
    return {
        **os.environ,
        "MSWEA_CONFIGURED": "true",  # skip mini's first-run setup prompt
        "MSWEA_SILENT_STARTUP": "1",
        "MSWEA_GLOBAL_CONFIG_DIR": str(workdir / "mini-config"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # litellm would fetch its price list from the internet
        "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "unused"),
    }


def solve(task: dict[str, Any], workdir: Path) -> float:
    require_tools("bwrap", "strace")
    if not (VENV / "bin" / "mini").exists():
        raise FileNotFoundError(f"{VENV / 'bin' / 'mini'} is missing: bash scripts/setup.sh --coding builds it")
    checkout = buggy_checkout(task, workdir / "checkout")
    episode = prepare_episode(
        checkout,
        workdir / "session",
        python=str(VENV / "bin" / "python"),
        hidden_tests=task["hidden_tests"],
        timeout_s=STEP_TIMEOUT_S,
        bounds=bounds_from_env(os.environ),  # ALIGHT_SANDBOX_WORKSPACE_MB, _MEMORY_MB, _PIDS (config: agent.env)
    )
    output = workdir / "trajectory.json"
    try:
        try:
            subprocess.run(
                mini_argv(episode.session, task, output), env=mini_env(workdir), timeout=EPISODE_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            print(f"mini ran past {EPISODE_TIMEOUT_S:g}s; grading what it left", file=sys.stderr)
        grade = grade_episode(
            episode,
            checkout,
            task["FAIL_TO_PASS"],
            task["PASS_TO_PASS"],
            pythonpath=task.get("pythonpath", ["."]),
            reference=task_reference(task),  # the fix against the original on inputs no test has
        )
    finally:
        episode.close()  # the workspace off its tmpfs (its bytes were bounded while the episode ran)
    exit_status = json.loads(output.read_text())["info"].get("exit_status", "") if output.exists() else "no trajectory"
    print(
        f"{task['instance_id']}: mini {exit_status or 'ended'}; reward {grade.reward} "
        f"(f2p {grade.fail_to_pass:.2f}, p2p {grade.pass_to_pass:.2f})"
    )
    for violation in grade.violations:
        print(f"  gate {violation.rule}: {violation.evidence}")
    return report_grade(grade)


@alight.rollout
def main(task: dict[str, Any]) -> float:
    with tempfile.TemporaryDirectory(prefix="alight-coding-") as tmp:
        return solve(task, Path(tmp))


if __name__ == "__main__":
    rows = Path(sys.argv[1]).read_text().splitlines()
    chosen = json.loads(rows[int(sys.argv[2]) if len(sys.argv) > 2 else 0])
    with tempfile.TemporaryDirectory(prefix="alight-coding-") as tmp:
        solve(chosen, Path(tmp))
