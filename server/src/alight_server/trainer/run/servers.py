"""What a training run asks of the servers it runs against; the caller hands them in (stacks/opening.py builds them).

The loop imports neither the stack nor the dashboard: `alight train` gives `TrainingRun` a `StackOpener`,
asked twice around the trainer's loading, so that servers someone else runs are checked (and vLLM's slow
start-up begins) before the minutes the trainer takes to load, and the run's own servers start after it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from alight.client import AlightClient
from alight_server.trainer.backends.base import TrainerBackend
from alight_server.trainer.run.weight_sync import WeightSync

if TYPE_CHECKING:
    from alight_server.trainer.backends.policy_set import PolicySet
    from alight_server.trainer.config.run import TrainConfig


class RunStack(Protocol):
    """A started stack: its server's client and URL, the way weights reach inference, and its shutdown."""

    client: AlightClient | None

    @property
    def url(self) -> str: ...

    @property
    def serves_other_weights(self) -> bool:
        """True when inference starts with weights other than the trainer's (an earlier run's)."""
        ...

    def weight_sync(self) -> WeightSync: ...

    def close(self) -> None: ...


class StackOpener(Protocol):
    """Opens a run's stack: `open_servers` before the trainer loads, `open_local` after it when that gave None."""

    def open_servers(self, config: TrainConfig, run_dir: Path) -> RunStack | None:
        """The started stack when it does not serve the trainer's model itself (servers you run, verl's replicas)."""
        ...

    def open_local(self, config: TrainConfig, run_dir: Path, backend: TrainerBackend | PolicySet) -> RunStack:
        """The run's own stack, serving the loaded trainer's policy."""
        ...

    def link(self, stack: RunStack, run_id: str) -> str:
        """The line the run prints at start: where its dashboard is, and where the admin key is."""
        ...

    def abandon(self) -> None:
        """Stop what `open_servers` started that no stack owns yet (the run failed before `open_local`)."""
        ...
