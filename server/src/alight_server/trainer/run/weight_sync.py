"""Weight sync: pause the gateway, drain in-flight calls, load new weights, bump the policy version, resume.

The new version is chosen before loading (one past the current), so a server that records versions itself
(vLLM's weight_version) is told the same number the gateway records. With several policies only one policy's
calls are paused, and its tensors load as that policy's LoRA adapter."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
import torch

from alight.client import AlightClient

Weights = dict[str, torch.Tensor]


class WeightTarget(Protocol):
    """An inference server that loads new weights in place (`inference.vllm_weights.VllmWeights`). One serving
    several policies also has `load_adapter(name, tensors, version)`: tensors in peft's naming, asked when needed."""

    def load(self, weights: Callable[[], Weights], version: int) -> None: ...


@dataclass
class DrainReport:
    """What the last update's drain saw."""

    in_flight_at_pause: int
    seconds: float
    timed_out: bool  # calls were still running when the weights changed (let through and marked)


@dataclass(eq=False)
class WeightSync:
    """Pushes trainer weights into an in-process `InferenceEngine`, a `WeightTarget`, or to /admin/weights, or
    wraps a backend's own weight load (`paused`: verl syncs its replicas itself)."""

    client: AlightClient
    engine: Any = None
    inference_url: str | None = None
    inference_key: str | None = None
    drain_timeout_s: float = 120.0
    weights_dir: str | None = None
    target: WeightTarget | None = None
    late_calls_allowed: bool = field(default=False, init=False)
    last_drain: DrainReport | None = field(default=None, init=False)

    def allow_late_calls(self, drain_timeout_s: float) -> None:
        """After `drain_timeout_s` update anyway instead of failing; calls still in flight are marked."""
        self.drain_timeout_s, self.late_calls_allowed = drain_timeout_s, True

    def push(
        self,
        weights: Weights | Callable[[], Weights],
        metadata: dict[str, Any] | None = None,
        policy: str | None = None,
    ) -> tuple[int, float]:
        """Load `weights` (a function is asked only when needed) everywhere the gateway sends calls; with `policy`
        they are its LoRA adapter's and only its calls pause. (new policy version, seconds paused)."""

        def get() -> Weights:
            return weights() if callable(weights) else weights

        def load(version: int) -> None:
            if policy is not None:
                self._load_adapter(policy, get, version)
            elif self.target is not None:
                self.target.load(get, version)
            elif self.engine is not None:
                self.engine.update_weights(get())
            else:  # a backend that loads weights itself (verl) calls `paused` and never gets here
                self._post_weights(get(), "model.safetensors", {})

        return self.paused(load, metadata, policy)

    def paused(
        self, load: Callable[[int], int | None], metadata: dict[str, Any] | None = None, policy: str | None = None
    ) -> tuple[int, float]:
        """Run `load(next version)` with the gateway (or `policy`'s calls) paused and drained, then resume as the
        version `load` returns (the upstreams' own, when it re-registers them) or else the next. (version, seconds)."""
        started = time.monotonic()
        version = int(self.client.pause_gateway(policy)["policy_version"]) + 1
        changed = False
        try:
            # drain_gateway waits longer than the drain itself; the client's own 60 s would cut it short
            drain = self.client.drain_gateway(self.drain_timeout_s, policy)
            drained = bool(drain.get("drained", False))
            self.last_drain = DrainReport(
                int(drain.get("in_flight_at_start", 0)), float(drain.get("waited_s", 0.0)), not drained
            )
            if not drained and not self.late_calls_allowed:
                raise RuntimeError(
                    f"model calls still in flight after {self.drain_timeout_s}s of draining; weights not updated"
                )
            version = load(version) or version
            changed = True
        finally:
            resumed = self.client.resume_gateway(
                weights_changed=changed,
                policy_version=version if changed else None,
                metadata=metadata,
                policy=policy,
            )
        return int(resumed["policy_version"]), time.monotonic() - started

    def _load_adapter(self, policy: str, tensors: Callable[[], Weights], version: int) -> None:
        """One policy's LoRA adapter into the engine, the weight target, or the inference server."""
        if self.target is not None:
            load_adapter = getattr(self.target, "load_adapter", None)  # WeightTarget's docstring says how it is called
            if load_adapter is None:
                raise ValueError(
                    f"the weight target {type(self.target).__name__} loads whole models only; it cannot update "
                    f"policy {policy!r}'s adapter (serve several policies with a target that has load_adapter)"
                )
            load_adapter(policy, tensors, version)
        elif self.engine is not None:
            self.engine.update_adapter(policy, tensors())
        else:
            self._post_weights(tensors(), "adapter_model.safetensors", {"adapter": policy})

    def _post_weights(self, weights: Weights, filename: str, extra: dict[str, Any]) -> None:
        """Write `weights` to a folder and ask the inference server's /admin/weights to load it."""
        if self.inference_url is None:
            raise ValueError("weight sync needs the embedded engine, a weight target or server.inference_url")
        from safetensors.torch import save_file

        if self.weights_dir:
            Path(self.weights_dir).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="alight-weights-", dir=self.weights_dir) as folder:
            path = Path(folder) / filename
            save_file({k: v.detach().cpu().clone() for k, v in weights.items()}, str(path))  # clone: tied tensors
            headers = {"Authorization": f"Bearer {self.inference_key}"} if self.inference_key else {}
            response = httpx.post(
                f"{self.inference_url}/admin/weights", json={"path": folder, **extra}, headers=headers, timeout=600
            )
            if response.status_code >= 400:
                raise RuntimeError(
                    f"inference server refused the weights: {response.status_code} {response.text[:500]} (it reads "
                    "them from a folder on this machine; on another machine set server.weights_dir to shared storage)"
                )
