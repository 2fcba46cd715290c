"""`alight run AGENT --task JSON` / `alight run -- COMMAND...`: one rollout of an agent, then its trajectory.

Its server and policy: run_policy.py. What the agent gets, what prints, the exit code and the hints of a failed
run: docs/sdk.md, "`alight run`".
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError

from alight import envvars
from alight.commands.exits import exit_with
from alight.commands.options import AdminKeyOption, TrainingConfigOption
from alight.commands.run_policy import RunOptions, UpstreamKey, key_hint, open_server, refused_upstreams
from alight.schemas import AttemptFinish, AttemptStart, FailureKind, Mode, RolloutCreate, RunnerSpec, Trajectory


def parse_task(task: str | None, task_file: Path | None) -> Any:
    if task is not None and task_file is not None:
        raise typer.BadParameter("give the task with --task or --task-file, not both", param_hint="--task")
    if task_file is not None:
        try:
            return json.loads(task_file.read_text())
        except (OSError, ValueError) as exc:
            raise typer.BadParameter(f"cannot read JSON from {task_file}: {exc}", param_hint="--task-file") from exc
    try:
        return json.loads(task) if task is not None else None
    except ValueError as exc:
        raise typer.BadParameter(f"--task must be JSON ({exc}); got {task!r}", param_hint="--task") from exc


def runner_for(agent: list[str]) -> RunnerSpec:
    """One `file.py:function` / `module:function` argument is a decorated function; anything else a command."""
    if len(agent) == 1 and ":" in agent[0] and " " not in agent[0] and "/" not in agent[0].rpartition(":")[2]:
        return RunnerSpec(entrypoint=check_target(agent[0]))
    return RunnerSpec(command=agent, cwd=os.getcwd())


def with_environment(runner: RunnerSpec, env: list[str], inherit_env: list[str]) -> RunnerSpec:
    """`runner` with the --env NAME=VALUE pairs and the --inherit-env patterns; a malformed one is a usage error."""
    values: dict[str, str] = {}
    for pair in env:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise typer.BadParameter(f"{pair!r} must look like NAME=VALUE", param_hint="--env")
        values[name] = value
    try:
        return RunnerSpec.model_validate({**runner.model_dump(), "env": values, "inherit_env": inherit_env})
    except ValidationError as exc:
        raise typer.BadParameter("; ".join(e["msg"] for e in exc.errors()), param_hint="--inherit-env") from None


def check_target(target: str) -> str:
    """A file target becomes absolute (the agent may run elsewhere); a module one is checked by the agent."""
    module_ref, sep, attr = target.rpartition(":")
    if not sep or not module_ref or not attr:
        raise typer.BadParameter(
            f"{target!r} must look like 'path/to/agent.py:function' or 'package.module:function'", param_hint="AGENT"
        )
    if module_ref.endswith(".py"):
        path = Path(module_ref).expanduser().resolve()
        if not path.is_file():
            raise typer.BadParameter(f"agent file {str(path)!r} does not exist", param_hint="AGENT")
        return f"{path}:{attr}"
    return target


def run_attempt(
    start: AttemptStart,
    server_url: str,
    runner: RunnerSpec,
    workdir: Path,
    timeout_s: float,
    quiet_stdout: bool = False,
) -> AttemptFinish:
    """Start the agent process for `start`, wait for it, and say how it ended.

    `quiet_stdout` sends the agent's stdout to stderr, keeping ours for machine-readable output.
    """
    # As every runner does: the host variables the spec names (and a few harmless defaults), its env, the contract.
    env = envvars.inherited_env(os.environ, runner.inherit_env)
    env.update(runner.env)
    env.update(envvars.attempt_env(start, server_url, task_dir=workdir))
    argv = envvars.agent_argv(runner, sys.executable)
    try:
        proc = subprocess.Popen(argv, env=env, cwd=runner.cwd, stdout=sys.stderr if quiet_stdout else None)
    except OSError as exc:
        return AttemptFinish(status="failed", failure_kind=FailureKind.INFRA, message=f"cannot start {argv}: {exc}")
    handle = f"local:{proc.pid}"
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        message = f"agent ran past {timeout_s:g}s and was killed"
        return AttemptFinish(status="failed", failure_kind=FailureKind.TIMEOUT, message=message, runner_handle=handle)
    if code == 0:
        return AttemptFinish(status="succeeded", exit_code=0, runner_handle=handle)
    message = f"agent exited with code {code}"
    return AttemptFinish(
        status="failed", failure_kind=FailureKind.TASK, exit_code=code, message=message, runner_handle=handle
    )


def failure_hints(
    trajectory: Trajectory, runner: RunnerSpec, finish: AttemptFinish | None, options: RunOptions
) -> list[str]:
    """Why the run failed, when the trajectory says: an upstream refused the gateway's key; or, when no model
    call failed at the gateway or upstream, the agent (run here) may have missed a variable of this shell."""
    refused = refused_upstreams(trajectory)
    if refused:
        return [key_hint(upstream_id, status, options) for upstream_id, status in refused]
    calls = [c.call for c in trajectory.calls]
    if any(c.status_code >= 500 or (c.upstream and c.status_code >= 400) for c in calls):
        return []  # the failed call is in the trajectory, with the gateway's reason
    if finish is None or finish.failure_kind != FailureKind.TASK:
        return []
    inherited = ", ".join([*envvars.DEFAULT_INHERIT_ENV, *runner.inherit_env])
    return [
        f"alight run: the agent got only {inherited} of this shell's variables; if it needs another, pass it "
        "with --inherit-env NAME or --env NAME=VALUE"
    ]


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run(
        agent: list[str] = typer.Argument(
            ..., help="path/to/agent.py:function, package.module:function, or `-- COMMAND ARGS...`"
        ),
        task: str | None = typer.Option(None, "--task", help="The task, as JSON (passed to the function)."),
        task_file: Path | None = typer.Option(None, "--task-file", help="Read the task JSON from this file."),
        server: str | None = typer.Option(None, "--server", help="Server URL; default: an embedded one."),
        admin_key: AdminKeyOption = None,
        config: TrainingConfigOption = None,
        upstream: str | None = typer.Option(
            None, "--upstream", help="OpenAI-compatible base URL (ending in /v1) to register as the policy."
        ),
        model: str | None = typer.Option(None, "--model", help="Model name the --upstream serves."),
        upstream_key_file: Path | None = typer.Option(
            None,
            "--upstream-key-file",
            help="A file holding the --upstream's API key, which the gateway sends it (alight's inference server: "
            "the api key file it printed; a provider: your key). Your --server reads it where its "
            "upstream_key_dir allows.",
        ),
        upstream_key_env: str | None = typer.Option(
            None,
            "--upstream-key-env",
            help="The name of a variable holding the --upstream's API key: of this shell (of your --server's "
            "environment with --server).",
        ),
        mode: Mode = typer.Option(Mode.TRAIN, "--mode", help="train or val (sampling temperature)."),
        timeout_s: float = typer.Option(600.0, "--timeout", help="Seconds before the agent is killed."),
        as_json: bool = typer.Option(False, "--json", help="Print the trajectory as JSON instead of tables."),
        reveal: bool = typer.Option(
            False, "--reveal", help="Print the exact trajectory; by default secrets and personal data are redacted."
        ),
        evaluator: str | None = typer.Option(
            None, "--evaluator", help="Score the attempt with this module:function / file.py:function (embedded)."
        ),
        env: list[str] = typer.Option(
            [], "--env", help="NAME=VALUE for the agent's environment (repeatable; as agent.env in a config)."
        ),
        inherit_env: list[str] = typer.Option(
            [],
            "--inherit-env",
            help="A variable of this shell (name or glob pattern) the agent also gets (repeatable; as agent.inherit_env).",
        ),
    ) -> None:
        """Run one rollout of AGENT and print its trajectory: calls, span paths, tool spans, rewards.

        The policy: --config serves a training config's model as `alight train` will (its inference:; the agent
        gets its agent.env and agent.inherit_env, its evaluator: scores), or --upstream URL names a server, with
        its key in --upstream-key-file / --upstream-key-env.
        """
        from alight.client import AlightClient, ApiError
        from alight.commands.trajectory_view import render_trajectory

        runner = with_environment(runner_for(agent), env, inherit_env)
        upstream_key = UpstreamKey.given(upstream_key_file, upstream_key_env, here=not server)
        options = RunOptions(server, admin_key, config, upstream, model, upstream_key, evaluator)
        options.check()
        task_value = parse_task(task, task_file)
        finish: AttemptFinish | None = None
        with tempfile.TemporaryDirectory(prefix="alight-run-") as tmp, contextlib.ExitStack() as stack:
            workdir = Path(tmp)
            url, key, runner = open_server(stack, workdir, runner, options)
            client = stack.enter_context(AlightClient(url, key))
            try:
                options.register_upstream(client)
                rollout_id = f"run-{uuid.uuid4().hex[:12]}"
                spec = RolloutCreate(
                    id=rollout_id,
                    task=task_value,
                    mode=mode,
                    runner=runner,
                    timeout_s=timeout_s,
                    max_attempts=1,
                )
                client.create_rollouts([spec])
                starts = client.claim_attempts(1, ids=[rollout_id])
                if starts:
                    start = starts[0]
                    finish = run_attempt(start, url, runner, workdir, timeout_s, quiet_stdout=as_json)
                    client.finish_attempt(rollout_id, start.attempt, finish)
                    exit_code = finish.exit_code if finish.exit_code is not None else 1
                else:
                    typer.echo(f"alight run: a controller claimed {rollout_id}; waiting for it", err=True)
                    deadline = time.monotonic() + timeout_s + 60
                    while client.wait_rollouts([rollout_id], timeout_s=30).pending:
                        if time.monotonic() > deadline:
                            raise typer.Exit(1)
                    exit_code = 0 if client.get_rollout(rollout_id).state == "succeeded" else 1
                trajectory = client.trajectory(rollout_id, reveal=reveal)  # the server redacts unless asked
            except ApiError as exc:
                raise exit_with(f"alight run: the server refused a request: {exc.status_code} {exc.message}") from exc
            if as_json:
                typer.echo(trajectory.model_dump_json(indent=2))
            else:
                render_trajectory(trajectory)
            for hint in failure_hints(trajectory, runner, finish, options):
                typer.echo(hint, err=True)
        raise typer.Exit(exit_code)
