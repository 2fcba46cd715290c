"""Where `alight run` finds its server and policy, and what to say when that policy's upstream refused the gateway.

The key `--upstream-key-file` / `--upstream-key-env` name is the gateway's for its upstream: the agent never holds it.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from alight.schemas import RunnerSpec, Trajectory, UpstreamCreate

if TYPE_CHECKING:
    from alight.client import AlightClient

SERVER_HINT = "without --server, alight run starts an embedded server, which needs: pip install alight-server"
UPSTREAM_ID = "alight-run"
KEY_FLAGS = "--upstream-key-file PATH (or --upstream-key-env NAME)"


def server_entry(name: str) -> Any:
    """The server package's `name` (entry point group `alight.server`); a missing package is a usage error."""
    found = entry_points(group="alight.server", name=name)
    if not found:
        raise typer.BadParameter(SERVER_HINT, param_hint="--server")
    try:
        return next(iter(found)).load()
    except ImportError as exc:
        raise typer.BadParameter(f"{SERVER_HINT} ({exc})", param_hint="--server") from exc


@dataclass(frozen=True)
class UpstreamKey:
    """Where the gateway's key for --upstream is: a file, or a variable of this shell (never the key itself in
    argv, which `ps` and shell history show). The server reads it at each call, as `api_key_file` /
    `api_key_env` of its registration."""

    file: Path | None = None
    env: str | None = None

    @classmethod
    def given(cls, file: Path | None, env: str | None, *, here: bool = True) -> UpstreamKey | None:
        """The key the flags name; read by a server on this machine (`here`) it is checked now: a missing file or
        unset variable fails before anything starts, not at the first model call. Your --server checks its own."""
        if file is not None and env is not None:
            raise typer.BadParameter("give the upstream's key with one of --upstream-key-file, --upstream-key-env")
        if file is not None:
            path = file.expanduser().resolve()
            try:
                empty = here and not path.read_text().strip()
            except (OSError, UnicodeDecodeError) as exc:
                raise typer.BadParameter(f"cannot read {str(path)!r}: {exc}", param_hint="--upstream-key-file") from exc
            if empty:
                raise typer.BadParameter(f"{str(path)!r} is empty", param_hint="--upstream-key-file")
            return cls(file=path)
        if env is not None:
            if here and not os.environ.get(env, "").strip():
                raise typer.BadParameter(f"${env} is not set (or empty) in this shell", param_hint="--upstream-key-env")
            return cls(env=env)
        return None

    def sources(self) -> dict[str, Any]:
        """What the embedded server must allow to read this key (ServerConfig upstream_key_dir / _env)."""
        return {"upstream_key_dir": self.file.parent} if self.file else {"upstream_key_env": [self.env]}


def with_agent_environment(runner: RunnerSpec, agent: RunnerSpec) -> RunnerSpec:
    """`runner` with the config agent's `env` and `inherit_env` under its own (--env wins over agent.env)."""
    inherit = [*agent.inherit_env, *(p for p in runner.inherit_env if p not in agent.inherit_env)]
    return runner.model_copy(update={"env": {**agent.env, **runner.env}, "inherit_env": inherit})


def open_server(
    stack: contextlib.ExitStack, workdir: Path, runner: RunnerSpec, options: RunOptions
) -> tuple[str, str, RunnerSpec]:
    """The server this run talks to (URL, admin key), and the runner with a config's agent environment: yours, the
    server package's serving the config's policy as `alight train` does, or its bare one allowed to read the key."""
    if options.server:
        return options.server.rstrip("/"), options.admin_key or "", runner
    if options.config is not None:
        policy_server = server_entry("policy_server")(workdir, options.config, options.evaluator)
        url, key, agent = stack.enter_context(policy_server)
        return url, key, with_agent_environment(runner, agent)
    sources = options.upstream_key.sources() if options.upstream_key else {}
    url, key = stack.enter_context(server_entry("embedded_server")(workdir, options.evaluator, **sources))
    return url, key, runner


@dataclass(frozen=True)
class RunOptions:
    """Where `alight run` finds its server and policy, checked for flags that contradict each other."""

    server: str | None
    admin_key: str | None
    config: Path | None
    upstream: str | None
    model: str | None
    upstream_key: UpstreamKey | None
    evaluator: str | None

    def check(self) -> None:
        if self.evaluator and self.server:
            raise typer.BadParameter("--evaluator is for the embedded server; yours runs its own (its --config)")
        if self.server and not self.admin_key:
            raise typer.BadParameter("--server needs the admin key (--admin-key or ALIGHT_ADMIN_KEY)")
        if self.config is not None and (self.server or self.upstream or self.model):
            raise typer.BadParameter(
                "--config serves the config's own policy; --server, --upstream and --model name another: give one",
                param_hint="--config",
            )
        if self.upstream_key is not None and not self.upstream:
            raise typer.BadParameter(f"{KEY_FLAGS} is the key for --upstream URL: give that URL too")

    def register_upstream(self, client: AlightClient) -> None:
        if self.upstream:
            key = self.upstream_key or UpstreamKey()
            key_file = str(key.file) if key.file else None
            upstream = UpstreamCreate(
                id=UPSTREAM_ID, url=self.upstream, model=self.model, api_key_file=key_file, api_key_env=key.env
            )
            client.add_upstream(upstream)
        elif not self.server and self.config is None:
            typer.echo(
                "alight run: no --config or --upstream given, so the agent's model calls will fail (503): serve "
                "your training config's policy with --config CONFIG.yaml, or name one with --upstream URL",
                err=True,
            )


def refused_upstreams(trajectory: Trajectory) -> list[tuple[str, int]]:
    """(upstream, status) for each upstream that refused the gateway's key on a call (it answered 401 or 403)."""
    calls = [c.call for c in trajectory.calls]
    return sorted({(c.upstream, c.status_code) for c in calls if c.upstream and c.status_code in (401, 403)})


def key_hint(upstream_id: str, status: int, options: RunOptions) -> str:
    """What is missing when an upstream refused the gateway: its key, which the agent never holds."""
    cause = (
        f"alight run: upstream {upstream_id} answered {status} to the gateway: the gateway's key for that upstream "
        "is missing or wrong. It is not the agent's environment: the agent reaches the gateway with its attempt's "
        "token, and the gateway calls the upstream with the key registered for it."
    )
    if upstream_id == UPSTREAM_ID:
        return (
            f"{cause} Pass that key with {KEY_FLAGS}: for alight's inference server (python -m "
            "alight_server.inference) the api key file it printed at start (.alight/inference/api.key by "
            "default); for a provider, a file or variable holding your API key. Or serve your training "
            "config's policy with --config CONFIG.yaml, which registers its key itself."
        )
    return (
        f"{cause} Register {upstream_id} on the server {options.server} again with its key (api_key_file or "
        f"api_key_env: docs/gateway.md, Upstreams), or pass --upstream URL with {KEY_FLAGS}."
    )
