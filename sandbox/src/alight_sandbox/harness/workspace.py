# pyright: strict
"""The parts every CLI harness shares: the task's shape, a fresh workspace, the sandboxed run, the check's reward."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

import alight
from alight.client import AlightClient
from alight.evaluation import REWARD_HACKING
from alight.schemas import MAX_EVIDENCE_CHARS, EventCreate
from alight_sandbox.guards.disk import bound_folders, release_folders
from alight_sandbox.guards.policy import SandboxPolicy, bounds_from_env
from alight_sandbox.guards.rules import RESOURCE_LIMIT
from alight_sandbox.guards.run import CommandResult, run_command
from alight_sandbox.harness.attempt import HarnessAttempt, current_attempt
from alight_sandbox.harness.environment import serves_environment, with_prompt
from alight_sandbox.harness.sandbox import DISK, CliLaunch, base_policy, host_env, run_cli_sandboxed

CHECK_ENV = "ALIGHT_HARNESS_CHECK"  # the check command when the task names none
CHECK_PYTHON_ENV = "ALIGHT_HARNESS_CHECK_PYTHON"  # an interpreter (a venv's python) the check sees, read-only
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
    reward_range: tuple[float, float] = Field(default=(0.0, 1.0), description="the check's reward is clamped here")

    @field_validator("reward_range")
    @classmethod
    def _ordered(cls, value: tuple[float, float]) -> tuple[float, float]:
        low, high = value
        if not (math.isfinite(low) and math.isfinite(high) and low <= high):
            raise ValueError(f"reward_range must be two finite numbers, low <= high; got {list(value)}")
        return value

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


# An attempt's workspace is `<harness>-<rollout id>-<attempt>-<mkdtemp's 8 characters>` (cli_episode): the
# rollout id is what lies between, whatever dashes it holds (neither end can hold one).
_WORKSPACE_NAME = re.compile(r"[a-z_]+-(?P<rollout>.+)-[0-9]+-[a-z0-9_]{8}")


def workspace_root() -> Path:
    """Where workspaces are made: $ALIGHT_WORKSPACE_ROOT, else $TMPDIR/alight-workspaces.

    Not the attempt's cwd: that is often the config's folder, which would fill with workspaces.
    """
    return Path(os.environ.get(WORKSPACE_ROOT_ENV) or Path(tempfile.gettempdir()) / "alight-workspaces")


def workspace_name(harness: str, rollout_id: str, attempt: int) -> str:
    """The start of an attempt's workspace folder's name (mkdtemp adds `-` and 8 characters)."""
    return f"{harness}-{rollout_id}-{attempt}"


def workspace_rollout(folder_name: str) -> str | None:
    """The rollout an attempt's workspace was made for, read from its folder's name (a purge erases it)."""
    found = _WORKSPACE_NAME.fullmatch(folder_name)
    return found["rollout"] if found else None


def make_workspace(task: CliTask, name: str) -> Workspace:
    """A fresh workspace for one attempt: the task's repo copied, then its files written."""
    parent = workspace_root()
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
        raise FileNotFoundError(
            f"{env_name}={chosen!r} does not exist (relative paths are from {Path.cwd()}); install it ({install})"
        )
    return os.path.abspath(chosen) if os.sep in chosen else chosen  # the CLI runs in another folder


def cli_args(defaults: list[str]) -> list[str]:
    extra = os.environ.get(ARGS_ENV)
    return shlex.split(extra) if extra is not None else defaults


SCORE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# A line that reads as a number attempt (one token of digits, signs, points, exponents, or a nan/inf
# spelling): it is either a strict finite decimal, or refused. Any other line ("3 passed") is no score.
NUMBER_LIKE = re.compile(r"[+-]?(?:[0-9.][0-9._eE+-]*|nan|inf(?:inity)?)", re.IGNORECASE)
CHECK_REFUSED = "check_reward_refused"  # rollout events the check's reward can raise
CHECK_CLAMPED = "check_reward_clamped"


def check_reward(task: CliTask, workspace: Workspace) -> float | None:
    """The check's verdict, run in the sandbox (no network, the workspace at /workspace, the system's tools, and
    the interpreter $ALIGHT_HARNESS_CHECK_PYTHON names, first on PATH, with its venv).

    A number on its last output line is the reward, clamped to the task's `reward_range`; a last line that
    reads as a number but is not a finite decimal (nan, inf, 1e999, 1_0) gives no reward and a
    `check_reward_refused` event. Otherwise exit 0 is 1.0 and anything else 0.0 (both clamped too).
    No check (neither in the task nor in $ALIGHT_HARNESS_CHECK): None, so a server-side evaluator can decide.
    """
    check = task.check if task.check is not None else os.environ.get(CHECK_ENV)
    if not check:
        return None
    argv = ["bash", "-c", check] if isinstance(check, str) else list(check)
    policy = base_policy(workspace.root, workspace.work, cpu_s=600, memory_mb=4096, timeout_s=task.check_timeout_s)
    if python := os.environ.get(CHECK_PYTHON_ENV):
        policy.python = os.path.abspath(python)
    done = run_command(policy, argv, env=host_env(), streams="split")
    if _stopped(done, "the check"):
        return 0.0
    if done.timed_out:
        print(f"alight harness: the check ran past {task.check_timeout_s:g}s: reward 0", file=sys.stderr)
        return 0.0
    print(
        f"alight harness: check exited {done.returncode}\n{done.output[-2000:]}{done.errors[-2000:]}", file=sys.stderr
    )
    lines = done.output.strip().splitlines()
    last = lines[-1].strip() if lines else ""
    if SCORE.fullmatch(last) and math.isfinite(float(last)):
        value = float(last)
    elif NUMBER_LIKE.fullmatch(last):
        reason = f"the check's last line {last[:100]!r} is not a finite number: no reward"
        print(f"alight harness: {reason}", file=sys.stderr)
        _record(CHECK_REFUSED, {"line": last[:200], "reason": reason})
        return None
    else:
        value = 1.0 if done.returncode == 0 else 0.0
    low, high = task.reward_range
    clamped = min(max(value, low), high)
    if clamped != value:
        _record(CHECK_CLAMPED, {"value": value, "reward": clamped, "range": [low, high]})
    return clamped


def _record(kind: str, payload: dict[str, Any]) -> None:
    """A rollout event about the check's reward: on the current span, and on the server when there is one."""
    alight.emit(kind, **{k: json.dumps(v) if isinstance(v, list) else v for k, v in payload.items()})
    ctx = alight.current()
    if ctx is not None and ctx.server_url:
        with AlightClient(ctx.server_url, ctx.token or "") as client:
            event = EventCreate(id=f"{kind}-{ctx.attempt}", attempt=ctx.attempt, kind=kind, payload=payload)
            client.add_event(ctx.rollout_id, event)


# (task, workspace, attempt, whether the run serves an environment) -> how to start the CLI: its arguments,
# its variables, its config files (with the environment's MCP server where there is one)
Prepare = Callable[[CliTask, Workspace, HarnessAttempt, bool], CliLaunch]


def cli_episode(task: Any, name: str, binary: str, prepare: Prepare) -> float | None:
    """One attempt of a CLI: fresh workspace, `binary ARGS` in the sandbox, then the check's reward (None: no check).

    Where the run serves an environment the CLI gets its MCP server, and a task without a prompt is asked to
    play it; the environment's score, posted by the server, is the reward (a check's, if any, is outranked)."""
    attempt = current_attempt()
    environment = serves_environment(attempt)
    cli_task = CliTask.parse(with_prompt(task) if environment else task)
    workspace = make_workspace(cli_task, workspace_name(name, attempt.rollout_id, attempt.attempt))
    launch = prepare(cli_task, workspace, attempt, environment)
    print(f"alight harness: {binary} in the sandbox, {workspace.work} at /workspace", file=sys.stderr, flush=True)
    # The workspace and each sandbox's /tmp on one tmpfs of the bound, where this process may mount one.
    disk_mb = bounds_from_env(os.environ).get("workspace_mb", SandboxPolicy.workspace_mb)
    bound_folders(workspace.root / DISK, [workspace.work], disk_mb)
    try:
        done = run_cli_sandboxed(binary, launch, workspace.root, workspace.work, workspace.home, attempt)
        if _stopped(done, name):
            return 0.0
        if done.returncode != 0:
            raise RuntimeError(f"{name} exited with code {done.returncode}")
        return check_reward(cli_task, workspace)
    finally:
        release_folders(workspace.root / DISK, [workspace.work])


def _stopped(done: CommandResult, what: str) -> bool:
    """A sandbox stopped at a total bound: a task failure with its `resource_limit` gate, never an infrastructure
    one (a policy must not learn that exhausting the host buys a skipped sample)."""
    print(f"alight harness: {what}'s sandbox bounds: {json.dumps(done.bounds)}", file=sys.stderr)
    if not done.resource_limit:
        return False
    evidence = f"{what}: {done.resource_limit}"[:MAX_EVIDENCE_CHARS]
    print(f"alight harness: {evidence}; reward 0 (gate {RESOURCE_LIMIT})", file=sys.stderr)
    _record(REWARD_HACKING, {"rule": RESOURCE_LIMIT, "evidence": evidence})
    return True


class CliWorkspaces:
    """The CLI harnesses' workspaces as a purge finds them (the `alight.workspaces` entry point; store/purge.py)."""

    @staticmethod
    def default_root() -> Path:
        return workspace_root()

    @staticmethod
    def rollout_of(folder_name: str) -> str | None:
        return workspace_rollout(folder_name)


CLI_WORKSPACES = CliWorkspaces()
