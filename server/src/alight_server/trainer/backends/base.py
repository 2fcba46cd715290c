"""The trainer backend seam: what the training loop (trainer/run/loop.py) asks of whatever runs the RL update."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Protocol

from alight.client import AlightClient
from alight_server.trainer.run.weight_sync import WeightSync
from alight_server.trainer.step.samples import SampleBatch

if TYPE_CHECKING:
    from alight_server.trainer.config.run import TrainConfig


class TrainerBackend(Protocol):
    """Runs the RL update for the training loop; every method is called on the loop's process (rank 0)."""

    def step(self, batch: SampleBatch) -> dict[str, float]:
        """One RL step on a batch of samples (advantages, loss, optimizer updates); returns step metrics."""
        ...

    def push_weights(self, sync: WeightSync, metadata: dict[str, Any]) -> tuple[int, float]:
        """The current weights (merged, or the LoRA adapter where inference takes one) into inference inside the
        gateway's pause -> drain -> load -> resume; returns (new policy version, seconds)."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything a checkpoint needs to continue this backend exactly (weights, optimizer, counters)."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned (after a `--resume`)."""
        ...

    def close(self) -> None:
        """Release processes, process groups and devices; the backend is unusable afterwards."""
        ...


def make_backend(config: TrainConfig, client: AlightClient | None = None) -> TrainerBackend:
    """The backend `config.trainer.backend` names, ready to train (on rank 0 of a multi-process run). A backend
    that serves the policy itself (verl's replicas) registers its servers as upstreams through `client`."""
    if config.trainer.backend == "verl":
        return _verl_module().make_backend(config, client)
    from alight_server.trainer.backends.embedded import make_embedded_backend

    return make_embedded_backend(config)


def follow_rank(config: TrainConfig) -> None:
    """On ranks other than 0 of a torchrun launch: serve rank 0's backend until it closes."""
    if config.trainer.backend != "embedded":
        raise RuntimeError(
            f"trainer.backend {config.trainer.backend!r} does not run under torchrun; launch one `alight train` "
            "(verl starts its own workers on Ray)"
        )
    from alight_server.trainer.backends.follower import follow

    follow(config)


def _verl_module() -> Any:
    try:
        return importlib.import_module("alight_server.trainer.backends.verl")
    except ImportError as exc:
        raise RuntimeError(
            f"trainer.backend: verl needs the verl backend and verl itself ({exc}): pip install 'alight-server[verl]'"
        ) from exc
