"""The embedded stack: server, inference server and local controller in this process, for `alight train`.

With no server URL configured, a training run needs the whole system on one machine:
1. the alight server (SQLite in the run folder) on a free loopback port;
2. the inference engine behind its OpenAI-compatible app on another port, registered as the upstream;
3. a local controller on a thread, spawning one agent subprocess per attempt.
`close()` (or leaving the `with` block, Ctrl-C included) stops them in reverse order and kills agents.
"""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path
from typing import Any

from alight.client import AlightClient
from alight.schemas import UpstreamCreate
from alight_server.config import GatewayConfig, ServerConfig
from alight_server.serving import ServerThread, free_port

log = logging.getLogger("alight.trainer")

UPSTREAM_ID = "embedded-policy"


class EmbeddedStack:
    """Owns the threads of the embedded stack; `client` speaks to its server with the admin key."""

    def __init__(
        self,
        engine: Any,
        run_dir: Path,
        *,
        concurrency: int = 8,
        train_temperature: float = 1.0,
        val_temperature: float = 0.0,
        agent_env: dict[str, str] | None = None,
    ) -> None:
        self.engine = engine
        self.run_dir = run_dir
        self.concurrency = concurrency
        self.admin_key = secrets.token_urlsafe(24)
        port = free_port()
        self.server_config = ServerConfig(
            port=port,
            db_url=f"sqlite:///{run_dir / 'alight.db'}",
            admin_key=self.admin_key,
            gateway=GatewayConfig(train_temperature=train_temperature, val_temperature=val_temperature),
            log_level="warning",
        )
        self.agent_env = agent_env or {}
        self._threads: list[ServerThread] = []
        self.controller: Any = None
        self.client: AlightClient | None = None

    @property
    def url(self) -> str:
        return self.server_config.base_url()

    def start(self) -> EmbeddedStack:
        from alight_server.app import create_app
        from alight_server.controller import Controller, LocalRunner
        from alight_server.inference.server import create_inference_app

        self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            server = ServerThread(create_app(self.server_config), port=self.server_config.port)
            server.start()
            self._threads.append(server)
            self.engine.start()  # shared with the trainer: the app must not own its lifetime
            inference = ServerThread(create_inference_app(self.engine, admin_key=self.admin_key))
            inference.start()
            self._threads.append(inference)
            self.client = AlightClient(self.url, self.admin_key, timeout=60)
            self.client.add_upstream(
                UpstreamCreate(id=UPSTREAM_ID, url=f"{inference.url}/v1", model=self.engine.model_name)
            )
            runner = LocalRunner(logs_dir=self.run_dir / "logs", base_env={**os.environ, **self.agent_env})
            controller_client = AlightClient(self.url, self.admin_key, timeout=60)
            self.controller = Controller(controller_client, runner, concurrency=self.concurrency, poll_interval=0.2)
            self.controller.start()
        except BaseException:
            self.close()
            raise
        log.info("embedded stack up: server %s, inference %s", self.url, self._threads[-1].url)
        return self

    def close(self) -> None:
        """Stop the controller (killing agents it runs), the servers, then the engine. Safe to call twice."""
        if self.controller is not None:
            self.controller.stop(kill_running=True)
            self.controller.client.close()
            self.controller = None
        if self.client is not None:
            self.client.close()
            self.client = None
        while self._threads:
            self._threads.pop().stop()
        self.engine.stop()

    def __enter__(self) -> EmbeddedStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
