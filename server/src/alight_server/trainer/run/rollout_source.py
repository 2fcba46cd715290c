"""Where a training step's rollouts come from, behind one interface the loop asks.

Each step's own groups (`StepGroups`, trainer/run/phases.py), the groups in flight of asynchronous training
(`PoolGroups`, trainer/run/async_pool.py), or trajectories imported from logs with `traces.run` (`ImportedTraces`)."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from alight.api_models import RolloutQuery
from alight.client import AlightClient
from alight.schemas import Rollout
from alight_server.trainer.report.display import RunDisplay
from alight_server.trainer.run.async_pool import GroupPool
from alight_server.trainer.run.dataset import TaskCursor
from alight_server.trainer.run.judging import Judging
from alight_server.trainer.run.phases import RunPhases, StartedPhase
from alight_server.trainer.run.rollouts import RolloutPhase, collect, tally


@dataclass(frozen=True)
class StepRollouts:
    """One step's finished rollouts, the source's own metrics, and each group's loss weight (None: all 1)."""

    phase: RolloutPhase
    metrics: dict[str, float] = field(default_factory=dict[str, float])
    weights: dict[str, float] | None = None
    # several policies in async training: policy -> group id -> the weight of that policy's rows (staleness per policy)
    policy_weights: dict[str, dict[str, float]] | None = None


class RolloutSource(Protocol):
    """What the loop asks for rollouts."""

    # True when rollouts keep running while the step trains: training then leaves torch's threads as they are,
    # so the engine keeps decoding.
    runs_during_training: bool

    def start_ahead(self, step: int) -> bool:
        """Start `step`'s rollouts now (behind the first validation) where the source can; whether it did."""
        ...

    def take(self, step: int, version: int, display: RunDisplay) -> StepRollouts:
        """`step`'s rollouts, finished, while inference serves policy `version`."""
        ...

    def checkpoint(self) -> dict[str, Any]:
        """What a checkpoint keeps of the source (merged into its payload); {} when nothing."""
        ...


class StepGroups:
    """Each step's own groups, created and awaited whole."""

    runs_during_training = False

    def __init__(self, phases: RunPhases, judging: Judging | None = None) -> None:
        self.phases, self.judging = phases, judging
        self._ahead: StartedPhase | None = None

    def start_ahead(self, step: int) -> bool:
        self._ahead = self.phases.start_train(step)
        return True

    def take(self, step: int, version: int, display: RunDisplay) -> StepRollouts:
        started, self._ahead = self._ahead or self.phases.start_train(step), None
        phase = self.phases.wait(started, display)
        if self.judging is None:
            return StepRollouts(phase)
        display.status(f"step {step + 1} rollouts: judging")
        return StepRollouts(self.judging.judge_phase(phase), self.judging.metrics())

    def checkpoint(self) -> dict[str, Any]:
        return {}


class PoolGroups:
    """The groups in flight of asynchronous training."""

    runs_during_training = True

    def __init__(self, pool: GroupPool) -> None:
        self.pool = pool

    def start_ahead(self, step: int) -> bool:
        return False  # the pool keeps its groups in flight itself

    def take(self, step: int, version: int, display: RunDisplay) -> StepRollouts:
        taken = self.pool.take(step, version, lambda text: display.status(f"step {step + 1} {text}"))
        self.pool.top_up(step + 1)  # the taken groups' places run while this step trains and updates
        phases = [g.phase for g in taken.groups if g.phase is not None]
        rollouts = [r for p in phases for r in p.rollouts]
        phase = tally(rollouts, [t for p in phases for t in p.trajectories], taken.metrics["time/wait_s"])
        judged = self.pool.judging.metrics() if self.pool.judging is not None else {}
        return StepRollouts(phase, {**taken.metrics, **judged}, taken.weights, taken.policy_weights)

    def checkpoint(self) -> dict[str, Any]:
        return {"async_pool": self.pool.state()}


class ImportedTraces:
    """Trajectories imported from logs (`traces.run`): each step the next `per_step`, in a seeded order."""

    runs_during_training = False

    def __init__(self, client: AlightClient, name: str, per_step: int, seed: int) -> None:
        found: dict[str, Rollout] = {}  # ids `<name>-...`, as `alight data import --name` makes them
        query = RolloutQuery(id_prefix=f"{name}-", limit=1000)
        while page := client.list_rollouts_page(query).rollouts:
            found.update((r.id, r) for r in page)
            query = query.model_copy(update={"since_seq": page[-1].seq})
        if not found:
            raise ValueError(
                f"traces.run {name!r}: the server holds no rollouts of that run; import them first with "
                f"`alight data import FILE --format F --name {name}` (docs/traces.md)"
            )
        rollouts = sorted(found.values(), key=lambda r: r.id)
        random.Random(seed).shuffle(rollouts)
        self.client, self.per_step = client, per_step
        self.cursor = TaskCursor(rollouts, seed)

    def start_ahead(self, step: int) -> bool:
        return False  # nothing to sample

    def take(self, step: int, version: int, display: RunDisplay) -> StepRollouts:
        started = time.monotonic()
        display.status(f"step {step + 1}: reading {self.per_step} imported trajectories")
        phase = collect(self.client, self.cursor.take(self.per_step), started)
        return StepRollouts(phase, {"traces/epoch": float(self.cursor.epoch)})

    def checkpoint(self) -> dict[str, Any]:
        return {"traces_cursor": self.cursor.state()}

    def restore(self, state: dict[str, int]) -> None:
        self.cursor.restore(state)
