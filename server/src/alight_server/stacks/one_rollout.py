"""The servers `alight run` starts without --server (reached through the `alight.server` entry points).

`embedded_server`: the alight server alone, on a temporary SQLite file (`--upstream` names the policy).
`policy_server`: the stack `alight train CONFIG` would run, serving the config's model with its inference
section (the embedded engine, or vLLM) and registered as the gateway's upstream with its key, but no
controller: `alight run` starts the one agent itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import typer

from alight.schemas import RunnerSpec
from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.http.auth import generate_admin_key
from alight_server.stacks.server_thread import ServerThread, free_port

TRAIN_EXTRA = "pip install 'alight-server[train]'"


@contextlib.contextmanager
def embedded_server(
    workdir: Path,
    evaluator: str | None = None,
    *,
    upstream_key_dir: Path | None = None,
    upstream_key_env: Sequence[str] = (),
) -> Iterator[tuple[str, str]]:
    """(url, admin key) of a server on a temporary SQLite file, for the duration of the block; an upstream
    registered on it may take its key from a file under `upstream_key_dir` or the variables `upstream_key_env`."""
    key = generate_admin_key()
    config = ServerConfig(
        admin_key=key,
        db_url=f"sqlite:///{workdir / 'alight.db'}",
        port=free_port(),
        evaluator=evaluator,
        upstream_key_dir=upstream_key_dir,
        upstream_key_env=list(upstream_key_env),
    )
    try:
        app = create_app(config)
    except ValueError as exc:  # an evaluator that cannot be loaded
        raise typer.BadParameter(str(exc), param_hint="--evaluator") from exc
    with ServerThread(app, port=config.port) as url:
        yield url, key


@contextlib.contextmanager
def policy_server(
    workdir: Path, config_path: Path, evaluator: str | None = None
) -> Iterator[tuple[str, str, RunnerSpec]]:
    """(url, admin key, the config's agent) of the config's stack in `workdir` (not its output_dir: a training
    run's store stays untouched), its policy served as `alight train` serves it; `evaluator` replaces the config's."""
    try:
        from alight_server.trainer.config.run import ConfigError, load_config
    except ImportError as exc:
        raise typer.BadParameter(f"serving the config's policy needs the train extra ({exc}): {TRAIN_EXTRA}") from exc
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from exc
    if config.server.url is not None:
        raise typer.BadParameter(
            f"{config_path} runs against your servers (server.url {config.server.url}): use --server "
            f"{config.server.url} with its admin key instead",
            param_hint="--config",
        )
    if config.trainer.backend == "verl":
        raise typer.BadParameter(
            f"{config_path} uses trainer.backend verl, whose rollout replicas serve the policy only inside a "
            "training run: run this agent against one with --upstream URL --upstream-key-file PATH",
            param_hint="--config",
        )
    try:  # torch and the model's libraries: only once the config is one this can serve
        from alight_server.stacks.kinds import EmbeddedStack
        from alight_server.stacks.opening import stack_options, vllm_policy
        from alight_server.trainer.run.policy_engine import engine_adapters, policy_engine
        from alight_server.trainer.run.train_step import torch_threads
    except ImportError as exc:
        raise typer.BadParameter(f"serving the config's policy needs the train extra ({exc}): {TRAIN_EXTRA}") from exc
    options = {**stack_options(config), "evaluator": evaluator or config.evaluator, "run_agents": False}
    with torch_threads(config.inference.torch_threads):
        vllm = vllm_policy(config, workdir) if config.inference.backend == "vllm" else None
        engine = None if vllm else policy_engine(config.model, config.inference, engine_adapters(config))
        stack = EmbeddedStack(engine, workdir, vllm=vllm, **options)
        try:
            stack.start()
        except ValueError as exc:  # an evaluator that cannot be loaded
            raise typer.BadParameter(str(exc), param_hint="--config / --evaluator") from exc
        try:
            yield stack.url, stack.admin_key, config.agent
        finally:
            stack.close()
