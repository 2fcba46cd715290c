"""Weight sync: pause the gateway, drain in-flight calls, load new weights, bump the policy version, resume.

Model calls that arrive during the pause get a retryable 429 with Retry-After (the OpenAI client
retries by itself), so an agent never sees a broken call, and every recorded call names the policy
version that really served it.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import torch

from alight.client import AlightClient


class WeightSync:
    """Pushes trainer weights into an in-process `InferenceEngine`, or to an inference server's /admin/weights."""

    def __init__(
        self,
        client: AlightClient,
        engine: Any = None,
        inference_url: str | None = None,
        inference_key: str | None = None,
        drain_timeout_s: float = 120.0,
        weights_dir: str | None = None,
    ) -> None:
        if engine is None and inference_url is None:
            raise ValueError("weight sync needs the embedded engine or server.inference_url")
        self.client = client
        self.engine = engine
        self.inference_url = inference_url
        self.inference_key = inference_key
        self.drain_timeout_s = drain_timeout_s
        self.weights_dir = weights_dir

    def push(self, weights: dict[str, torch.Tensor], metadata: dict[str, Any] | None = None) -> tuple[int, float]:
        """Load `weights` everywhere the gateway sends calls; returns (new policy version, seconds paused)."""
        return self.paused(lambda: self._load(weights), metadata)

    def paused(self, load: Callable[[], None], metadata: dict[str, Any] | None = None) -> tuple[int, float]:
        """Run `load` (a backend's own way of updating inference) inside pause -> drain -> resume.

        The policy version is bumped only when `load` returned; on an error the gateway resumes on the old one.
        """
        started = time.monotonic()
        self.client.pause_gateway()
        changed = False
        try:
            # drain_gateway waits longer than the drain itself; the client's own 60 s would cut it short
            drain = self.client.drain_gateway(self.drain_timeout_s)
            if not drain.get("drained", False):
                raise RuntimeError(
                    f"model calls still in flight after {self.drain_timeout_s}s of draining; weights not updated"
                )
            load()
            changed = True
        finally:
            resumed = self.client.resume_gateway(weights_changed=changed, metadata=metadata)
        return int(resumed["policy_version"]), time.monotonic() - started

    def _load(self, weights: dict[str, torch.Tensor]) -> None:
        if self.engine is not None:
            self.engine.update_weights(weights)
            return
        from safetensors.torch import save_file

        if self.weights_dir:
            Path(self.weights_dir).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="alight-weights-", dir=self.weights_dir) as folder:
            path = Path(folder) / "model.safetensors"
            save_file({k: v.detach().cpu().clone() for k, v in weights.items()}, str(path))  # clone: tied tensors
            headers = {"Authorization": f"Bearer {self.inference_key}"} if self.inference_key else {}
            response = httpx.post(
                f"{self.inference_url}/admin/weights", json={"path": folder}, headers=headers, timeout=600
            )
            if response.status_code >= 400:
                raise RuntimeError(
                    f"inference server refused the weights: {response.status_code} {response.text[:500]} (it reads "
                    "them from a folder on this machine; on another machine set server.weights_dir to shared storage)"
                )
