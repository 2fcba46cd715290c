"""The stacks `alight train` runs against: the embedded one in this process, or servers you started.

`EmbeddedStack` is docs/training.md's "What one run does" (its upstream key: docs/inference.md); with
`run_agents=False` it runs no controller, for `alight run --config`, which starts its one agent itself.
`ReplicaStack` is the server and the controller: with `trainer.backend: verl` the backend's rollout replicas are
the inference side and register themselves. `ExternalStack` (`server.url`) only checks that the server, its
upstream and the inference server answer.

Long because: the stack kinds a run is handed, side by side so the face they share (start, url,
weight_sync, close) reads in one place; ReplicaStack is EmbeddedStack less its policy server.
"""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path
from typing import Any

import httpx

from alight.client import AlightClient, ApiError
from alight.schemas import UpstreamCreate
from alight_server.config import GatewayConfig, GatewayLimits, ServerConfig
from alight_server.inference.vllm_policy import VllmPolicy
from alight_server.inference.vllm_weights import VllmWeights
from alight_server.policies.routing import GatewayRouting
from alight_server.stacks.server_thread import ServerThread
from alight_server.stacks.state import load_or_create, write_private
from alight_server.store.keys.sealed_logs import LogSeal
from alight_server.trainer.config.sections import ServerSettings
from alight_server.trainer.run.weight_sync import WeightSync

log = logging.getLogger("alight.trainer")

UPSTREAM_ID = "embedded-policy"
KEY_DIR = "upstream-keys"


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
        vllm: VllmPolicy | None = None,
        evaluator: str | list[str] | dict[str, str] | None = None,
        environment: dict[str, Any] | None = None,
        max_output_tokens: int | None = None,
        preload: bool = False,
        routing: GatewayRouting | None = None,
        run_agents: bool = True,
        limits: GatewayLimits | None = None,
    ) -> None:
        self.engine = engine
        self.preload = preload
        self.run_agents = run_agents  # False: no controller (`alight run` starts its one agent itself)
        self._runner: Any = None  # the LocalRunner, closed after the controller
        self.vllm = vllm
        self._check_policy()
        self.run_dir = run_dir
        self.concurrency = concurrency
        # Kept in the run folder (0600): a resumed run serves at the same address with the same key.
        self.state = load_or_create(run_dir)
        self.admin_key = self.state.admin_key
        self.server_config = ServerConfig(
            port=self.state.server_port,
            db_url=f"sqlite:///{run_dir / 'alight.db'}",
            admin_key=self.admin_key,
            data_key=os.environ.get("ALIGHT_DATA_KEY") or "secret",  # store/keys/kek.py; `secret`: this run's admin key
            gateway=GatewayConfig(
                train_temperature=train_temperature,
                val_temperature=val_temperature,
                max_output_tokens=max_output_tokens,
                routing=routing,
                limits=limits or GatewayLimits(),  # the train config's `limits:`
            ),
            log_level="warning",
            evaluator=evaluator,
            environment=environment,
            upstream_key_dir=run_dir / KEY_DIR,
        )
        self._threads: list[ServerThread] = []
        self.controller: Any = None
        self.client: AlightClient | None = None

    def _check_policy(self) -> None:
        if (self.engine is None) == (self.vllm is None):
            raise ValueError("the embedded stack serves the policy with the engine or with vLLM: give one")

    @property
    def url(self) -> str:
        return self.server_config.base_url()

    def start(self) -> EmbeddedStack:
        from alight_server.app import create_app

        self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            server = ServerThread(create_app(self.server_config), port=self.server_config.port)
            server.start()
            self._threads.append(server)
            inference_url, model, inference_key = self._serve_policy()
            self.client = AlightClient(self.url, self.admin_key, timeout=60)
            if inference_url is not None and inference_key is not None:
                key_file = self._write_upstream_key(inference_key)
                upstream = UpstreamCreate(id=UPSTREAM_ID, url=f"{inference_url}/v1", model=model, api_key_file=key_file)
                self.client.add_upstream(upstream)
            if self.run_agents:
                self._start_controller()
        except BaseException:
            self.close()
            raise
        log.info("embedded stack up: server %s, inference %s", self.url, inference_url or "the backend's")
        return self

    def _start_controller(self) -> None:
        from alight_server.controller.local import LocalRunner
        from alight_server.controller.loop import Controller

        # Agents die with this process (a kill -9 included); any an earlier, killed run left are
        # reaped here, so the controller settles their attempts as infra losses and retries them.
        runner = self._runner = LocalRunner(
            logs_dir=self.run_dir / "logs",
            die_with_parent=True,
            preload=self.preload,
            log_seal=LogSeal(self.server_config.kek_source()),  # ended attempts' logs sealed at rest
        )
        runner.reap_leftovers()
        controller_client = AlightClient(self.url, self.admin_key, timeout=60)
        self.controller = Controller(controller_client, runner, concurrency=self.concurrency, poll_interval=0.2)
        self.controller.start()

    def _serve_policy(self) -> tuple[str | None, str | None, str | None]:
        """Start the inference side; returns its base URL, model name and the key that opens its /v1."""
        if self.vllm is not None:
            return self.vllm.start(), self.vllm.model, self.vllm.api_key
        self.engine.start()  # shared with the trainer: the app must not own its lifetime
        from alight_server.inference.server import create_inference_app

        # The trainer updates the engine in this process, so nobody needs /admin: no key opens it.
        api_key = secrets.token_urlsafe(32)
        app = create_inference_app(self.engine, api_key=api_key)
        inference = ServerThread(app, port=self.state.inference_port)
        inference.start()
        self._threads.append(inference)
        return inference.url, self.engine.model_name, api_key

    def _write_upstream_key(self, key: str) -> str:
        """The key in a 0600 file under the server's key folder; a new key each start replaces the last."""
        folder = self.run_dir / KEY_DIR
        folder.mkdir(mode=0o700, exist_ok=True)
        path = folder / f"{UPSTREAM_ID}.key"
        write_private(path, key)
        return str(path.resolve())  # a registration names an absolute path; output_dir may be relative

    def _stop_policy(self) -> None:
        if self.vllm is not None:
            self.vllm.stop()
        else:
            self.engine.stop()

    def weight_sync(self) -> WeightSync:
        assert self.client is not None, "start() first"
        if self.vllm is not None:
            return WeightSync(self.client, target=self.vllm.weights)
        return WeightSync(self.client, engine=self.engine)

    @property
    def serves_other_weights(self) -> bool:
        return False  # the engine was just loaded from the same model as the trainer

    def close(self) -> None:
        """Stop the controller (killing agents it runs), the servers, then the engine. Safe to call twice."""
        if self.controller is not None:
            self.controller.stop(kill_running=True)
            self.controller.client.close()
            self.controller = None
        if self._runner is not None:
            self._runner.close()
            self._runner = None
        if self.client is not None:
            self.client.close()
            self.client = None
        while self._threads:
            self._threads.pop().stop()
        self._stop_policy()

    def __enter__(self) -> EmbeddedStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class ReplicaStack(EmbeddedStack):
    """The alight server and the controller, no inference: the trainer backend brings its own servers
    (verl's rollout replicas) and registers them as upstreams, and loads their weights itself."""

    def __init__(self, run_dir: Path, **options: Any) -> None:
        super().__init__(None, run_dir, vllm=None, **options)

    def _check_policy(self) -> None:
        pass  # neither engine nor vLLM, on purpose

    def _serve_policy(self) -> tuple[str | None, str | None, str | None]:
        return None, None, None

    def _stop_policy(self) -> None:
        pass

    def weight_sync(self) -> WeightSync:
        assert self.client is not None, "start() first"
        return WeightSync(self.client)  # the backend loads its replicas inside WeightSync.paused


class ExternalStack:
    """A server, controller and inference server someone started; `start()` checks they answer."""

    def __init__(
        self,
        settings: ServerSettings,
        model: str,
        run_dir: Path,
        evaluator: str | list[str] | dict[str, str] | None = None,
        *,
        vllm: bool = False,
    ) -> None:
        assert settings.url is not None and settings.inference_url is not None  # the config validates this
        self.vllm = vllm  # the inference server is a vLLM you started (in dev mode), not alight's
        self.url = settings.url
        self.inference_url = settings.inference_url
        self.weights_dir = settings.weights_dir
        self.model = model
        self.run_dir = run_dir
        self.evaluator = evaluator
        self.admin_key = settings.admin_key or os.environ.get("ALIGHT_ADMIN_KEY")
        self.inference_key = settings.inference_admin_key or self.admin_key
        self.client: AlightClient | None = None
        self.serves_other_weights = False

    def start(self) -> ExternalStack:
        if not self.admin_key:
            raise RuntimeError("server.url is set but no admin key: set server.admin_key or ALIGHT_ADMIN_KEY")
        self.client = AlightClient(self.url, self.admin_key, timeout=60)
        try:
            self._check_server()
            self._check_inference()
        except BaseException:
            self.close()
            raise
        log.info("external stack: server %s, inference %s", self.url, self.inference_url)
        return self

    def _check_server(self) -> None:
        assert self.client is not None
        if not self.client.ready():
            raise RuntimeError(f"no alight server answers at {self.url}/readyz: start `alight serve` or fix server.url")
        try:
            status = self.client.gateway_status()
        except ApiError as exc:
            raise RuntimeError(f"the server at {self.url} refused the admin key: {exc.message}") from exc
        if not status["upstreams"]:
            raise RuntimeError(
                f"the server at {self.url} has no upstream, so agents' model calls would fail: register the "
                f"inference server first (POST /api/upstreams with url {self.inference_url}/v1; docs/training.md)"
            )
        served = status.get("evaluator")
        if self.evaluator is not None and served is None:
            raise RuntimeError(
                f"the config names the evaluator {self.evaluator!r}, but the server at {self.url} runs none, so "
                "no rollout would get its reward: start it with `alight serve --config server.yaml` holding the "
                "same `evaluator:` line (docs/zero-change.md)"
            )
        if self.evaluator is not None and served != self.evaluator:
            log.warning(
                "the server's evaluator is %r, the config names %r; the server's scores", served, self.evaluator
            )
        upstream_urls = [u["url"] for u in status["upstreams"]]
        if not any(u.startswith(self.inference_url) for u in upstream_urls):
            log.warning("server.inference_url %s is none of the upstreams %s", self.inference_url, upstream_urls)

    def _check_inference(self) -> None:
        if self.vllm:
            self.serves_other_weights = self._vllm_target().weight_version() not in ("default", "0")
            return
        try:
            health = httpx.get(f"{self.inference_url}/health", timeout=10).json()
            # A path that does not exist: the right key gets a 400 and nothing loads, a wrong one a 401.
            probe = httpx.post(
                f"{self.inference_url}/admin/weights",
                json={"path": str(self.run_dir / "no-such-weights")},
                headers={"Authorization": f"Bearer {self.inference_key}"} if self.inference_key else {},
                timeout=10,
            )
        except (httpx.HTTPError, ValueError) as exc:
            raise RuntimeError(f"no inference server answers at {self.inference_url}/health: {exc}") from exc
        if probe.status_code in (401, 403):
            raise RuntimeError(
                f"the inference server at {self.inference_url} refused the key for /admin/weights: set "
                "server.inference_admin_key to its --admin-key"
            )
        if health.get("model") not in (None, self.model):
            log.warning("the inference server serves %r, the trainer trains %r", health.get("model"), self.model)
        # Weights loaded before this run (an earlier run's policy) are replaced by the trainer's at the start.
        self.serves_other_weights = int(health.get("policy_version") or 0) > 0

    def _vllm_target(self) -> VllmWeights:
        # vLLM reads the weights from a folder: on another machine, server.weights_dir must be shared storage.
        weights_dir = Path(self.weights_dir) if self.weights_dir else self.run_dir / "vllm-weights"
        return VllmWeights(self.inference_url, weights_dir, api_key=self.inference_key)

    def weight_sync(self) -> WeightSync:
        assert self.client is not None, "start() first"
        if self.vllm:
            return WeightSync(self.client, target=self._vllm_target())
        return WeightSync(
            self.client,
            inference_url=self.inference_url,
            inference_key=self.inference_key,
            weights_dir=self.weights_dir,
        )

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def __enter__(self) -> ExternalStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
