# pyright: strict
"""The parts every CLI harness shares: the task's shape, a fresh workspace, the CLI run, the check's reward."""

from __future__ import annotations

import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from alight.harness.attempt import HarnessAttempt, current_attempt

CHECK_ENV = "ALIGHT_HARNESS_CHECK"  # the check command when the task names none
ARGS_ENV = "ALIGHT_HARNESS_ARGS"  # extra CLI arguments, shell-quoted, replacing the harness's defaults
WORKSPACE_ROOT_ENV = "ALIGHT_WORKSPACE_ROOT"  # where workspaces are made (default: $TMPDIR/alight-workspaces)


class CliTask(BaseModel):
    """One task for a CLI agent: the prompt, the files it starts from, and how its work is checked."""

    model_config = ConfigDict(extra="allow")  # datasets carry more fields (answers, ids): kept, unused here

    prompt: str = Field(min_length=1, description="what the CLI is asked, as a user would type it")
    files: dict[str, str] = Field(default_factory=dict, description="relative path -> content, written first")
    repo: str | None = Field(default=None, description="a folder copied into the workspace first")
    check: str | list[str] | None = Field(default=None, description="run in the workspace after the episode")
    check_timeout_s: float = Field(default=300.0, gt=0)

    @classmethod
    def parse(cls, task: Any) -> CliTask:
        if isinstance(task, str):
            task = {"prompt": task}
        try:
            return cls.model_validate(task)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'task'}: {e['msg']}" for e in exc.errors())
            raise ValueError(f"a CLI task needs at least a 'prompt' string ({problems})") from None


@dataclass(frozen=True)
class Workspace:
    root: Path  # holds both folders below; removed by nobody (the attempt's files stay for inspection)
    work: Path  # the CLI's working directory: the task's files, what the check runs on
    home: Path  # the CLI's own configuration, kept out of `work` so the check never sees it


def make_workspace(task: CliTask, name: str) -> Workspace:
    """A fresh workspace for one attempt: the task's repo copied, then its files written."""
    # Not the attempt's cwd by default: that is often the config's folder, which would fill with workspaces.
    parent = Path(os.environ.get(WORKSPACE_ROOT_ENV) or Path(tempfile.gettempdir()) / "alight-workspaces")
    parent.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=parent))
    work, home = root / "work", root / "home"
    if task.repo:
        source = Path(task.repo).expanduser()
        if not source.is_dir():
            raise ValueError(f"task repo {task.repo!r} is not a folder")
        shutil.copytree(source, work, symlinks=True)
    work.mkdir(exist_ok=True)
    home.mkdir()
    for relative, content in task.files.items():
        path = (work / relative).resolve()
        if not path.is_relative_to(work.resolve()):
            raise ValueError(f"task file {relative!r} points outside the workspace")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return Workspace(root, work, home)


def find_cli(env_name: str, command: str, install: str) -> str:
    """The CLI's executable: $env_name, else `command` on PATH; a clear error naming the install otherwise."""
    chosen = os.environ.get(env_name) or shutil.which(command)
    if not chosen:
        raise FileNotFoundError(f"{command!r} is not on PATH; install it ({install}) or set {env_name}")
    if os.sep in chosen and not Path(chosen).is_file():
        raise FileNotFoundError(f"{env_name}={chosen!r} does not exist (relative paths are from {Path.cwd()})")
    return os.path.abspath(chosen) if os.sep in chosen else chosen  # the CLI runs in another folder


def cli_args(defaults: list[str]) -> list[str]:
    extra = os.environ.get(ARGS_ENV)
    return shlex.split(extra) if extra is not None else defaults


def run_cli(argv: list[str], workspace: Workspace, env: dict[str, str]) -> int:
    """Run the CLI in the workspace with its output passed through to the attempt's log."""
    print(f"alight harness: {argv[0]} in {workspace.work}", file=sys.stderr, flush=True)
    completed = subprocess.run(argv, cwd=workspace.work, env=env, stdin=subprocess.DEVNULL, check=False)
    return completed.returncode


def check_reward(task: CliTask, workspace: Workspace) -> float | None:
    """The check's verdict on the workspace: a number on its last output line, else 1.0 on exit 0 and 0.0 otherwise.

    No check (neither in the task nor in $ALIGHT_HARNESS_CHECK): None, so a server-side evaluator can decide.
    """
    check = task.check if task.check is not None else os.environ.get(CHECK_ENV)
    if not check:
        return None
    argv = ["bash", "-c", check] if isinstance(check, str) else list(check)
    try:
        done = subprocess.run(
            argv, cwd=workspace.work, capture_output=True, text=True, timeout=task.check_timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        print(f"alight harness: the check ran past {task.check_timeout_s:g}s: reward 0", file=sys.stderr)
        return 0.0
    print(
        f"alight harness: check exited {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-2000:]}", file=sys.stderr
    )
    lines = done.stdout.strip().splitlines()
    if lines:
        try:
            value = float(lines[-1])
        except ValueError:
            value = None
        if value is not None and math.isfinite(value):
            return value
    return 1.0 if done.returncode == 0 else 0.0


# (task, workspace, attempt) -> (the CLI's arguments, its environment); may write config files first
Prepare = Callable[[CliTask, Workspace, HarnessAttempt], tuple[list[str], dict[str, str]]]


def cli_episode(task: Any, name: str, binary: str, prepare: Prepare) -> float | None:
    """One attempt of a CLI: fresh workspace, `binary ARGS` in it, then the check's reward (None: no check)."""
    attempt = current_attempt()
    cli_task = CliTask.parse(task)
    workspace = make_workspace(cli_task, f"{name}-{attempt.rollout_id}-{attempt.attempt}")
    argv, env = prepare(cli_task, workspace, attempt)
    code = run_cli([binary, *argv], workspace, env)
    if code != 0:
        raise RuntimeError(f"{name} exited with code {code}")
    return check_reward(cli_task, workspace)
