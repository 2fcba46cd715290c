"""New policy weights into a running vLLM server, in place, through the HTTP routes vLLM provides for RL.

The steps of one update, and why not vLLM's NCCL / CUDA-IPC transfer: docs/training.md "Inference with vLLM".
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

# Generous: reload_weights on a big model from slow disk takes minutes.
_TIMEOUT = httpx.Timeout(1800.0, connect=10.0)


class VllmWeightError(RuntimeError):
    """vLLM refused or failed a weight update; the message says which step and what vLLM answered."""


class VllmWeights:
    """Weight updates for one vLLM server at `url` (its root, not /v1); `adapter` set: push only LoRA adapters."""

    def __init__(
        self,
        url: str,
        weights_dir: Path,
        *,
        adapter: Any = None,
        adapter_name: str | None = None,
        api_key: str | None = None,
        adapter_specs: Mapping[str, Any] | None = None,
        base_model: str | Path | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.weights_dir = Path(weights_dir)
        self.adapter = adapter  # a peft PeftModel: save_pretrained() writes what vLLM's LoRA loader reads
        self.adapter_name = adapter_name
        if adapter is not None and not adapter_name:
            raise ValueError("a LoRA adapter needs the name vLLM serves it under")
        # Several policies: each adapter's AdapterSpec by the name vLLM serves it under (--lora-modules).
        self.adapter_specs = dict(adapter_specs or {})
        self.base_model = base_model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(base_url=self.url, timeout=_TIMEOUT, headers=headers)

    def load(self, weights: Callable[[], dict[str, Any]], version: int) -> None:
        """Load new weights (or the adapter) and mark them `version`; vLLM serves nothing in between."""
        full = self.adapter is None
        self._paused_update(lambda: self._reload(weights()) if full else self._load_adapter(inplace=True), version)

    def load_adapter(self, name: str, tensors: Callable[[], Mapping[str, Any]], version: int) -> None:
        """Replace adapter `name` (one of several, served since launch) with `tensors` (peft names) as `version`."""
        from alight_server.inference.adapters import write_adapter_folder

        spec = self.adapter_specs.get(name)
        if spec is None:
            raise VllmWeightError(f"vLLM at {self.url} serves no LoRA adapter {name!r}; its adapters: "
                                  f"{sorted(self.adapter_specs)}")  # fmt: skip

        def load() -> None:
            folder = write_adapter_folder(self._fresh_folder(f"lora-{name}"), spec, tensors(), self.base_model or "")
            body = {"lora_name": name, "lora_path": str(folder), "load_inplace": True}
            self._call("POST", "/v1/load_lora_adapter", f"load LoRA adapter {name!r}", json=body)

        self._paused_update(load, version)

    def _paused_update(self, load: Callable[[], None], version: int) -> None:
        """Pause vLLM, `load`, drop the prefix cache its old weights computed, set `version`; resume whatever failed."""
        self._call("POST", "/pause", "pause generation", params={"mode": "wait"})
        try:
            load()
            self._call("POST", "/reset_prefix_cache", "reset the prefix cache")
            self._call("POST", "/update_weight_version", "set the weight version", json={"new_version": str(version)})
        finally:
            self._call("POST", "/resume", "resume generation")

    def load_initial_adapter(self) -> None:
        """Register the trainer's untrained adapter (the base model's behaviour) before the first call."""
        self._load_adapter(inplace=False)

    def weight_version(self) -> str:
        return str(self._call("GET", "/weight_info", "read the weight version").json()["weight_version"])

    def close(self) -> None:
        self.http.close()

    def _reload(self, weights: dict[str, Any]) -> None:
        from safetensors.torch import save_file

        folder = self._fresh_folder("full")
        # clone: tied tensors (embeddings and lm_head) share storage, which safetensors refuses to save
        save_file(
            {k: v.detach().cpu().contiguous().clone() for k, v in weights.items()}, str(folder / "model.safetensors")
        )
        self._call(
            "POST", "/collective_rpc", "reload the weights",
            json={"method": "reload_weights", "kwargs": {"weights_path": str(folder)}},
        )  # fmt: skip

    def _load_adapter(self, *, inplace: bool) -> None:
        folder = self._fresh_folder("lora")
        self.adapter.save_pretrained(str(folder))
        body = {"lora_name": self.adapter_name, "lora_path": str(folder), "load_inplace": inplace}
        self._call("POST", "/v1/load_lora_adapter", "load the LoRA adapter", json=body)

    def _fresh_folder(self, kind: str) -> Path:
        """One folder per kind, rewritten each update: vLLM reads it during the call and keeps no handle."""
        folder = self.weights_dir / kind
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        os.chmod(folder, 0o755)  # a vLLM running as another user on the same machine must read it
        return folder

    def _call(self, method: str, path: str, what: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise VllmWeightError(f"could not {what}: vLLM at {self.url} did not answer {path} ({exc})") from exc
        if response.status_code == 401:
            raise VllmWeightError(
                f"could not {what}: vLLM at {self.url} refused the key for {path}: give the trainer the key its "
                "key guard opens every route with (ALIGHT_VLLM_ADMIN_KEY there, server.inference_admin_key here)"
            )
        if response.status_code == 404 and path in ("/pause", "/collective_rpc", "/weight_info"):
            raise VllmWeightError(
                f"vLLM at {self.url} has no {path} route: start it with VLLM_SERVER_DEV_MODE=1 "
                "(the in-place weight-update routes are dev-mode routes)"
            )
        if response.status_code == 404 and path == "/v1/load_lora_adapter":
            raise VllmWeightError(
                f"vLLM at {self.url} has no {path} route: start it with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True "
                "and --enable-lora"
            )
        if response.status_code >= 400:
            raise VllmWeightError(
                f"could not {what}: vLLM answered {path} with {response.status_code} {response.text[:500]}"
            )
        return response
