"""The policy served by vLLM for one training run: the server subprocess plus its in-place weight updates.

Several policies served by one vLLM: docs/inference.md "Several adapters".
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from alight_server.inference.adapters import AdapterSpec, write_adapter_folder, zero_adapter
from alight_server.inference.vllm_server import VllmServer
from alight_server.inference.vllm_weights import VllmWeights


class VllmPolicy:
    """`start()` brings vLLM up on the trainer's model (and, with LoRA, its untrained adapter); `stop()` ends it."""

    def __init__(
        self,
        server: VllmServer,
        model: str,
        weights_dir: Path,
        adapter: Any = None,
        adapter_specs: Mapping[str, AdapterSpec] | None = None,
    ) -> None:
        self.server = server
        self.base_model = model
        self.weights_dir = weights_dir
        self.adapter = adapter
        self.adapter_specs = dict(adapter_specs or {})  # several policies: the LoRA ones, by name
        self._weights: VllmWeights | None = None

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
                url,
                self.weights_dir,
                adapter=self.adapter,
                adapter_name=self.model,
                api_key=self.admin_key,
                adapter_specs=self.adapter_specs,
                base_model=self.server.launch.model_dir,
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


def policy_launch(weights_dir: Path, model_dir: Path, policies: Mapping[str, AdapterSpec | None]) -> dict[str, Any]:
    """VllmLaunch settings serving `policies` (name -> LoRA spec, or None: the base under that name).

    Writes each LoRA policy's zero adapter (the base model's outputs) as a peft folder under
    `weights_dir/initial/NAME` for `--lora-modules`; returns lora_modules, base_names and lora_rank.
    """
    specs = {name: spec for name, spec in policies.items() if spec is not None}
    modules = {
        name: write_adapter_folder(weights_dir / "initial" / name, spec, zero_adapter(model_dir, spec), model_dir)
        for name, spec in specs.items()
    }
    base_names = tuple(name for name, spec in policies.items() if spec is None)
    return {
        "lora_modules": modules,
        "base_names": base_names,
        "lora_rank": max((spec.r for spec in specs.values()), default=None),
    }
