"""deploy/github-actions/pilot.yml as GitHub would read it: valid against GitHub's own workflow schema (the
SchemaStore schema check-jsonschema ships, read offline), every `alight` option it passes exists, and its gate
fails the job on exactly the exit statuses `alight eval` documents as worse, safety regression and failure.

Nothing runs the workflow here (no GitHub runner); docs/pilot.md says what ran where.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from alight_server.commands.eval_compare import EXIT_FAILED, EXIT_IMPROVED, EXIT_NO_CHANGE, EXIT_SAFETY, EXIT_WORSE

WORKFLOW = Path(__file__).parents[2] / "deploy" / "github-actions" / "pilot.yml"
BIN = Path(sys.executable).parent


def check_jsonschema() -> str:
    found = shutil.which("check-jsonschema", path=str(BIN)) or shutil.which("check-jsonschema")
    if found is None:
        pytest.skip("check-jsonschema is missing: bash scripts/setup.sh --dev")
    return found


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    command = [check_jsonschema(), "--builtin-schema", "vendor.github-workflows", str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_the_pilot_workflow_is_valid_against_githubs_schema() -> None:
    done = validate(WORKFLOW)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("good", "bad", "error"),
    [
        ("runs-on:", "runs_on:", "'runs-on' is a required property"),  # a misspelt key of a job
        ("timeout-minutes: 90", "timeout-minutes: ninety", "jobs.pilot"),  # a value of the wrong type
        ("  workflow_dispatch:", "  workflow_dispatched:", "$.on"),  # an event GitHub does not have
    ],
)
def test_a_broken_copy_of_it_is_refused(tmp_path: Path, good: str, bad: str, error: str) -> None:
    text = WORKFLOW.read_text()
    assert text.count(good) == 1, good
    broken = tmp_path / "pilot.yml"
    broken.write_text(text.replace(good, bad))
    done = validate(broken)
    assert done.returncode == 1, done.stdout + done.stderr
    assert error in done.stdout, done.stdout


def commands() -> list[str]:
    """Each `alight` command line the workflow's steps run, continuation lines joined."""
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["pilot"]["steps"]
    lines = [step["run"].replace("\\\n", " ") for step in steps if "run" in step]
    return [m.group(0) for text in lines for m in re.finditer(r"\.venv/bin/alight [^\n]+", text)]


def test_every_alight_option_it_passes_exists() -> None:
    found = commands()
    assert {c.split()[1] for c in found} == {"eval", "train"}, found
    helps: dict[str, str] = {}
    for line in found:
        sub = line.split()[1]
        if sub not in helps:
            done = subprocess.run([str(BIN / "alight"), sub, "--help"], capture_output=True, text=True, timeout=120,
                                  env={"COLUMNS": "200", "PATH": str(BIN)})  # fmt: skip
            assert done.returncode == 0, done.stderr
            helps[sub] = done.stdout
        for option in re.findall(r"(?<!\S)--[a-z][a-z-]*", line):
            assert re.search(rf"{option}\b", helps[sub]), (option, sub)


def test_the_gate_fails_the_job_on_worse_safety_and_failure_only() -> None:
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["pilot"]["steps"]
    (gate,) = [step for step in steps if step.get("name") == "Gate on the verdict"]
    arms = dict(re.findall(r"^\s*(\S+)\) (.*?);;$", gate["run"], re.M))
    passing = {code for code, body in arms.items() if "exit" not in body}
    failing = {code: re.search(r"exit (\d+)", body) for code, body in arms.items() if "exit" in body}
    assert passing == {str(EXIT_IMPROVED), str(EXIT_NO_CHANGE)}, arms
    assert set(failing) == {str(EXIT_WORSE), str(EXIT_SAFETY), "*"}, arms
    assert all(m is not None and m.group(1) != "0" for m in failing.values()), arms
    assert failing["*"] is not None and failing["*"].group(1) == str(EXIT_FAILED)
    (compare,) = [step for step in steps if step.get("id") == "compare"]
    assert "--junit" in compare["run"] and "--markdown" in compare["run"] and "GITHUB_OUTPUT" in compare["run"]
