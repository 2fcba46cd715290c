"""`python -m alight_sandbox.guards.launch SESSION bwrap-args...`: a harness's bubblewrap executable, under our policy.

mini-swe-agent's bubblewrap environment runs every action as
`EXECUTABLE *wrapper_args --bind CWD CWD --chdir CWD [--setenv K V]... bash -c COMMAND`. Configured with
`executable: <python>` and `wrapper_args: [-m, alight_sandbox.guards.launch, SESSION]`, each action lands here:
the harness's own mounts are dropped, the episode's policy (SESSION/policy.json) decides what the
sandbox sees, and the command runs traced. The log of commands and the traces stay in SESSION, outside
the sandbox, so the evidence never comes from the agent.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from alight_sandbox.guards.policy import WORKSPACE, SandboxPolicy
from alight_sandbox.guards.run import run_command


def parse_harness_args(args: list[str]) -> tuple[str, dict[str, str], list[str]]:
    """(cwd, env, command) from bwrap-style args: the options bubblewrap environments append, then argv."""
    cwd, env, i = WORKSPACE, {}, 0
    while i < len(args) and args[i].startswith("--"):
        flag = args[i]
        if flag == "--chdir":
            cwd, i = args[i + 1], i + 2
        elif flag == "--setenv":
            env[args[i + 1]] = args[i + 2]
            i += 3
        elif flag in ("--bind", "--ro-bind", "--dev-bind", "--symlink"):
            i += 3  # the harness's mounts: the policy decides what is mounted
        else:
            i += 1
    if cwd != WORKSPACE and not cwd.startswith(WORKSPACE + "/"):
        cwd = WORKSPACE  # outside the workspace nothing of the agent's exists
    return cwd, env, args[i:]


def _stopped_by(log: Path) -> str:
    """The resource limit an earlier command of the episode reached ('' none)."""
    if not log.exists():
        return ""
    records = [json.loads(line) for line in log.read_text().splitlines() if line]
    return next((r["resource_limit"] for r in records if r.get("resource_limit")), "")


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m alight_sandbox.guards.launch SESSION_DIR [bwrap args...] COMMAND...", file=sys.stderr)
        return 2
    session = Path(argv[0])
    policy = SandboxPolicy.load(session / "policy.json")
    cwd, env, command = parse_harness_args(argv[1:])
    if not command:
        print("alight_sandbox.guards.launch: no command after the sandbox options", file=sys.stderr)
        return 2
    stopped = _stopped_by(session / "commands.jsonl")
    if stopped:  # the episode is over: no command of its runs again
        print(f"[sandbox] the episode was stopped at a resource limit ({stopped}); no further commands run")
        return 1
    stamp = f"{time.time_ns()}-{os.getpid()}"
    trace = Path(policy.trace_dir) / f"trace-{stamp}.log" if policy.trace_dir else None
    started = time.monotonic()
    result = run_command(policy, command, cwd=cwd, env=env, trace=trace)
    record = {
        "command": command,
        "cwd": cwd,
        "returncode": result.returncode,
        "timed_out": result.timed_out,
        "seconds": round(time.monotonic() - started, 3),
        "trace": trace.name if trace else None,
        "canary_in_output": bool(policy.canary_value) and policy.canary_value in result.output,
        "resource_limit": result.resource_limit,
        "bounds": result.bounds,
    }
    with (session / "commands.jsonl").open("a") as log:
        log.write(json.dumps(record) + "\n")
    sys.stdout.write(result.output)
    if result.timed_out:
        sys.stdout.write(f"\n[sandbox] command ran past {policy.timeout_s:g}s and was killed\n")
    if result.resource_limit:
        sys.stdout.write(f"\n[sandbox] {result.resource_limit}: the sandbox was killed and the episode stopped\n")
    sys.stdout.flush()
    return result.returncode if result.returncode >= 0 else 124


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
