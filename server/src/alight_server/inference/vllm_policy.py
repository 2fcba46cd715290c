"""The policy served by vLLM for one training run: the server subprocess plus its in-place weight updates."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from alight_server.inference.vllm_server import VllmLaunch, VllmServer, default_python
from alight_server.inference.vllm_weights import VllmWeights
from alight_server.serving import free_port

if TYPE_CHECKING:
    from alight_server.trainer.config import TrainConfig


class VllmPolicy:
    """`start()` brings vLLM up on the trainer's model (and, with LoRA, its untrained adapter); `stop()` ends it."""

    def __init__(self, server: VllmServer, model: str, weights_dir: Path, adapter: Any = None) -> None:
        self.server = server
        self.base_model = model
        self.weights_dir = weights_dir
        self.adapter = adapter
        self._weights: VllmWeights | None = None

    @classmethod
    def for_run(cls, cfg: TrainConfig, run_dir: Path, adapter: Any = None) -> VllmPolicy:
        """From `inference.vllm` of a training config; `adapter` is the trainer's PEFT model when LoRA is on.

        The launch depends only on the config (LoRA on: one adapter of rank lora.r), so the server can be
        spawned before the trainer exists and `adapter` set once it does.
        """
        from alight_server.inference.models import resolve_model

        settings = cfg.inference.vllm
        launch = VllmLaunch(
            model_dir=resolve_model(cfg.model),
            served_name=cfg.model,
            port=settings.port or free_port(),
            python=settings.python or default_python(),
            dtype=cfg.inference.dtype,
            max_model_len=settings.max_model_len,
            kv_cache_gb=settings.kv_cache_gb,
            gpu_memory_utilization=settings.gpu_memory_utilization,
            enforce_eager=settings.enforce_eager,
            tool_call_parser=settings.tool_call_parser,
            lora_rank=cfg.lora.r if cfg.lora.enabled else None,
            extra_args=list(settings.extra_args),
        )
        server = VllmServer(
            launch, log_path=run_dir / "logs" / "vllm.log", startup_timeout_s=settings.startup_timeout_s
        )
        return cls(server, cfg.model, run_dir / "vllm-weights", adapter=adapter)

    @property
    def model(self) -> str:
        """The name calls must use: the adapter's with LoRA (vLLM applies it per request), else the base model's."""
        return f"{self.base_model}-lora" if self.adapter is not None else self.base_model

    @property
    def api_key(self) -> str:
        """The key that opens vLLM's /v1 routes: the gateway's (the upstream registration carries it)."""
        return self.server.launch.api_key

    @property
    def admin_key(self) -> str:
        """The key that opens every route, the weight-update ones included: only this process holds it."""
        return self.server.launch.admin_key

    @property
    def weights(self) -> VllmWeights:
        assert self._weights is not None, "start() first"
        return self._weights

    def spawn(self) -> None:
        """Launch the server now and return: its minutes of start-up overlap the trainer's model load."""
        self.server.spawn()

    def start(self) -> str:
        url = self.server.start()
        try:
            self._weights = VllmWeights(
                url, self.weights_dir, adapter=self.adapter, adapter_name=self.model, api_key=self.admin_key
            )
            if self.adapter is not None:
                self._weights.load_initial_adapter()
        except BaseException:
            self.stop()
            raise
        return url

    def stop(self) -> None:
        if self._weights is not None:
            self._weights.close()
            self._weights = None
        self.server.stop()
