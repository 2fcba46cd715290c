"""Runs the real Claude Code or Codex CLI through this attempt's gateway, its home on the host so the session
file it writes is kept (the harness's sandbox throws its home away): the sample `alight data import` reads."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import alight

CLAUDE_OFF = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_ENABLE_TELEMETRY": "0",
}


@alight.rollout
def episode(task: Any) -> float:
    home, work = task["home"], task["work"]
    os.makedirs(work, exist_ok=True)
    gateway = os.environ["ALIGHT_GATEWAY_URL"]  # this attempt's gateway, ending in /v1
    token = os.environ["OPENAI_API_KEY"]  # the attempt token
    env = {"PATH": os.environ["PATH"], "HOME": home, "LANG": "C.UTF-8"}
    if task["cli"] == "claude":
        env |= CLAUDE_OFF | {"ANTHROPIC_BASE_URL": gateway.removesuffix("/v1"), "ANTHROPIC_API_KEY": token,
                             "CLAUDE_CONFIG_DIR": f"{home}/.claude"}  # fmt: skip
        argv = [task["bin"], "-p", task["prompt"], "--allowedTools", "Bash"]
    else:
        os.makedirs(f"{home}/.codex", exist_ok=True)
        with open(f"{home}/.codex/config.toml", "w") as f:
            f.write(task["config"].replace("GATEWAY_URL", gateway))
        env |= {"CODEX_HOME": f"{home}/.codex", "OPENAI_API_KEY": token}
        argv = [task["bin"], "exec", "--skip-git-repo-check", task["prompt"]]
    done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=200)
    return 1.0 if done.returncode == 0 else 0.0
