# pyright: strict
"""The agent environment contract (docs/sdk.md, "The environment contract"): the variables an attempt's process starts with."""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections.abc import Collection, Iterable, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from alight import semconv

if TYPE_CHECKING:  # the agent process never needs pydantic models at start-up
    from alight.schemas import AttemptStart, RunnerSpec

ALIGHT_SERVER_URL = "ALIGHT_SERVER_URL"
ALIGHT_ROLLOUT_ID = "ALIGHT_ROLLOUT_ID"
ALIGHT_ATTEMPT = "ALIGHT_ATTEMPT"
ALIGHT_MODE = "ALIGHT_MODE"
ALIGHT_TASK = "ALIGHT_TASK"
ALIGHT_TASK_FILE = "ALIGHT_TASK_FILE"
ALIGHT_TOKEN = "ALIGHT_TOKEN"
# Not in the minimal contract: the gateway URL survives an agent that overrides OPENAI_BASE_URL.
ALIGHT_GATEWAY_URL = "ALIGHT_GATEWAY_URL"
OPENAI_BASE_URL = "OPENAI_BASE_URL"
OPENAI_API_KEY = "OPENAI_API_KEY"
# Anthropic clients (the anthropic SDK, LangChain's "anthropic:..." models) append /v1/messages to this.
ANTHROPIC_BASE_URL = "ANTHROPIC_BASE_URL"
ANTHROPIC_API_KEY = "ANTHROPIC_API_KEY"
# The OpenAI Agents SDK uploads traces to api.openai.com with OPENAI_API_KEY, the attempt token here:
# off for attempts unless the rollout's runner env sets it (alight-openai-agents turns its own tracing on).
OPENAI_AGENTS_DISABLE_TRACING = "OPENAI_AGENTS_DISABLE_TRACING"
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
OTEL_EXPORTER_OTLP_TRACES_HEADERS = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
OTEL_RESOURCE_ATTRIBUTES = "OTEL_RESOURCE_ATTRIBUTES"

# Every variable attempt_env() may set; a runner clears these from its own environment first.
ALL = (
    ALIGHT_SERVER_URL,
    ALIGHT_ROLLOUT_ID,
    ALIGHT_ATTEMPT,
    ALIGHT_MODE,
    ALIGHT_TASK,
    ALIGHT_TASK_FILE,
    ALIGHT_TOKEN,
    ALIGHT_GATEWAY_URL,
    OPENAI_BASE_URL,
    OPENAI_API_KEY,
    ANTHROPIC_BASE_URL,
    ANTHROPIC_API_KEY,
    OPENAI_AGENTS_DISABLE_TRACING,
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
    OTEL_EXPORTER_OTLP_TRACES_HEADERS,
    OTEL_RESOURCE_ATTRIBUTES,
)

# Host variables every locally started agent gets without asking; `agent.inherit_env` adds names or glob
# patterns to these. Enough to find programs, decode text, tell the time, and write caches and temp files;
# never a credential. Anything else (cloud keys, hub tokens, PYTHONPATH) reaches an agent only when named.
DEFAULT_INHERIT_ENV = ("PATH", "LANG", "LC_*", "TZ", "HOME", "TMPDIR")
RESERVED_PREFIX = "ALIGHT_"  # the runner's own settings (its admin key above all): never an agent's


def reserved(name: str) -> bool:
    """A variable no host may hand an agent: the runner's ALIGHT_* settings and the contract's own variables."""
    return name.startswith(RESERVED_PREFIX) or name in ALL


def inherited_env(host: Mapping[str, str], inherit: Iterable[str] = (), *, defaults: bool = True) -> dict[str, str]:
    """The variables of `host` an agent starts with: DEFAULT_INHERIT_ENV (unless `defaults` is False) and the
    names or glob patterns in `inherit`; a reserved variable never, whatever a pattern matches."""
    patterns = [*(DEFAULT_INHERIT_ENV if defaults else ()), *inherit]
    return {k: v for k, v in host.items() if not reserved(k) and any(fnmatchcase(k, p) for p in patterns)}


def withheld_hint(output: str, withheld: Collection[str], limit: int = 5) -> str | None:
    """A sentence naming the setting to fix when `output` names a variable of `withheld` (set where the runner runs,
    missing from the agent's environment): any whole-word, case-sensitive mention (KeyError: 'HF_TOKEN', "WANDB_API_KEY
    not set", $AWS_PROFILE), not a list of error formats. Names under three characters (ordinary words) are skipped."""
    names = {name for name in withheld if len(name) >= 3 and not reserved(name)}
    if not names or not output:
        return None
    mentioned = sorted({w for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", output) if w in names})[:limit]
    if not mentioned:
        return None
    return (
        f"the agent's output names {', '.join(mentioned)}, set where the controller runs but not passed to the agent: agents "
        f"get only the host variables the rollout names; add it to agent.inherit_env (e.g. inherit_env: "
        f"[{mentioned[0]}]) or set its value in agent.env"
    )


# Larger tasks go through a file: environments are limited (execve fails near 128 KiB per string on Linux).
TASK_INLINE_LIMIT = 64 * 1024


def gateway_url(server_url: str, rollout_id: str, attempt: int) -> str:
    """This attempt's OpenAI-compatible base URL, ending in /v1."""
    return f"{server_url.rstrip('/')}/gw/{rollout_id}/{attempt}/v1"


def otlp_traces_url(server_url: str) -> str:
    return f"{server_url.rstrip('/')}/v1/traces"


def resource_attributes(rollout_id: str, attempt: int, mode: str) -> dict[str, str]:
    """Which rollout attempt a process works for: OTEL_RESOURCE_ATTRIBUTES, and the resource of the SDK's spans."""
    return {
        semconv.RESOURCE_ROLLOUT_ID: rollout_id,
        semconv.RESOURCE_ATTEMPT: str(attempt),
        semconv.RESOURCE_MODE: mode,
    }


def attempt_env(start: AttemptStart, server_url: str, task_dir: str | Path | None = None) -> dict[str, str]:
    """The variables an attempt's process needs, to be laid over the runner's own environment.

    `server_url` is the address the *agent* reaches the server at (it may differ from the server's own idea of itself,
    e.g. inside a cluster); the gateway and OTLP URLs derive from it. A task whose JSON exceeds TASK_INLINE_LIMIT is
    written to `task_dir` (default: the temp dir) and passed as ALIGHT_TASK_FILE instead of ALIGHT_TASK.
    """
    rollout = start.rollout
    server_url = server_url.rstrip("/")
    gateway = gateway_url(server_url, rollout.id, start.attempt)
    resource = resource_attributes(rollout.id, start.attempt, rollout.mode.value)
    env = {
        ALIGHT_SERVER_URL: server_url,
        ALIGHT_ROLLOUT_ID: rollout.id,
        ALIGHT_ATTEMPT: str(start.attempt),
        ALIGHT_MODE: rollout.mode.value,
        ALIGHT_TOKEN: start.token,
        ALIGHT_GATEWAY_URL: gateway,
        OPENAI_BASE_URL: gateway,
        OPENAI_API_KEY: start.token,
        ANTHROPIC_BASE_URL: gateway.removesuffix("/v1"),
        ANTHROPIC_API_KEY: start.token,
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: otlp_traces_url(server_url),
        OTEL_EXPORTER_OTLP_TRACES_HEADERS: f"authorization={quote('Bearer ' + start.token, safe='')}",
        # Values percent-encoded, as the OpenTelemetry spec asks.
        OTEL_RESOURCE_ATTRIBUTES: ",".join(f"{key}={quote(value, safe='')}" for key, value in resource.items()),
    }
    runner_env = rollout.runner.env if rollout.runner is not None else {}
    # The token must go only to alight; a rollout whose runner env names the variable has opted in.
    env[OPENAI_AGENTS_DISABLE_TRACING] = runner_env.get(OPENAI_AGENTS_DISABLE_TRACING, "1")
    task_json = json.dumps(rollout.task, separators=(",", ":"))
    if len(task_json.encode()) <= TASK_INLINE_LIMIT:
        env[ALIGHT_TASK] = task_json
    else:
        folder = Path(task_dir) if task_dir is not None else Path(tempfile.gettempdir())
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"alight-task-{_safe(rollout.id)}-{start.attempt}.json"
        path.write_text(task_json)
        env[ALIGHT_TASK_FILE] = str(path)
    return env


def agent_argv(runner: RunnerSpec, python: str | None = None) -> list[str]:
    """The argv that starts an attempt: an entrypoint goes through `python -m alight.entry`."""
    if runner.entrypoint:
        return [python or sys.executable, "-m", "alight.entry", runner.entrypoint]
    if runner.command:
        return list(runner.command)
    raise ValueError("runner spec has neither 'entrypoint' nor 'command'; set one, e.g. entrypoint='agent.py:main'")


def read_task(environ: Mapping[str, str] | None = None) -> object:
    """The task from ALIGHT_TASK or ALIGHT_TASK_FILE (None when neither is set)."""
    environ = os.environ if environ is None else environ
    if path := environ.get(ALIGHT_TASK_FILE):
        try:
            return json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"cannot read the task from {ALIGHT_TASK_FILE}={path!r}: {exc}") from exc
    text = environ.get(ALIGHT_TASK)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise RuntimeError(f"{ALIGHT_TASK} is not valid JSON ({exc}); got {text[:200]!r}") from exc


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)
