"""The store protocol: the one durable source of truth, SQLite or PostgreSQL behind it.

Long because: one protocol, every method of the store with its contract, and the errors and purge types
those methods name; the contract tests hold SQLite and PostgreSQL to all of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from alight.api_models import RolloutFilter, RolloutQuery
from alight.schemas import (
    Attempt,
    AttemptFinish,
    Event,
    EventCreate,
    GatewayPause,
    GatewayReplica,
    GatewaySync,
    ModelCall,
    PolicyVersion,
    Reward,
    RewardCreate,
    Rollout,
    RolloutCreate,
    RolloutState,
    Run,
    RunReport,
    RunStep,
    RunStepReport,
    SpanRecord,
    Upstream,
    UpstreamCreate,
)

if TYPE_CHECKING:
    from alight_server.store.keys.kek import KekSource


class StoreError(Exception):
    """Base of the errors the API turns into 4xx answers."""


class NotFound(StoreError):
    pass


class Conflict(StoreError):
    """An illegal state move, or an id reused with a different body.

    Caller-chosen ids make creates idempotent: repeating a create with the same id and the same body returns the stored
    object; the same id with a different body raises Conflict rather than silently keeping either one.
    """


class AttemptEnded(Conflict):
    """An agent wrote for an attempt that is no longer running (finished, failed or cancelled)."""


class Purged(NotFound):
    """The rollout was purged (retention or `alight data purge`): its tombstone says when and why."""

    def __init__(self, rollout_id: str, purged_at: datetime, reason: str) -> None:
        super().__init__(
            f"rollout {rollout_id!r} was purged on {purged_at:%Y-%m-%d %H:%M} UTC ({reason}): its trajectory, "
            "model calls, spans, events and rewards are deleted"
        )
        self.rollout_id, self.purged_at, self.reason = rollout_id, purged_at, reason


class SchemaTooNew(StoreError):
    pass


class InvalidValue(StoreError):
    """A value the store cannot keep faithfully (NaN or an infinity inside client JSON)."""


class SealError(StoreError):
    """A sealed cell or data key that does not open; the message names the table, row and column, or the key."""


@dataclass(frozen=True)
class PurgeScope:
    """Which ended rollouts to purge; every field given narrows the set (store/retention.py)."""

    before: datetime | None = None  # ended (last changed in a final state) before this time
    run_id: str | None = None  # created by this training run (ids `<run id>-...`)
    rollout_id: str | None = None  # this one rollout
    reason: str = "alight data purge"  # kept in the tombstone


@dataclass
class PurgeReport:
    """What a purge deleted (or, dry, would delete): rows per table, the rollouts, and what it kept and why."""

    dry_run: bool = False
    deleted: dict[str, int] = field(default_factory=dict)  # table -> rows
    rollouts: list[tuple[str, str | None]] = field(default_factory=list)  # (rollout id, its run folder or None)
    kept: dict[str, int] = field(default_factory=dict)  # why a matching rollout was kept -> how many


class Store(Protocol):
    """Every method is synchronous and commits before it returns.

    A method that returns has made its write durable: a `kill -9` of the
    server right after loses nothing it acknowledged.
    """

    def create_rollouts(self, items: Sequence[RolloutCreate]) -> list[Rollout]:
        """Idempotent per caller-chosen id: an existing id returns the stored rollout.

        Missing ids are generated. The rollout's policy_version is the current one.
        """
        ...

    def get_rollout(self, rollout_id: str) -> Rollout:
        """With its attempts. Raises NotFound."""
        ...

    def list_rollouts(self, query: RolloutQuery | None = None) -> list[Rollout]:
        """Ordered by `seq` (bumped on every change), only rollouts with seq > query.since_seq."""
        ...

    def transition(self, rollout_id: str, to: RolloutState) -> Rollout:
        """Move through TRANSITIONS; Conflict on an illegal move, NotFound on an unknown id.

        Cancelling a running rollout also fails its running attempt (kind none).
        """
        ...

    def claim_attempts(
        self, limit: int, ids: Sequence[str] | None = None, runner: str | None = None
    ) -> list[tuple[Rollout, int]]:
        """Atomically start the next attempt of up to `limit` rollouts that need one.

        `ids` restricts the claim to those rollouts (`alight run` claims its own). `runner` (a runner name) records each
        attempt's handle `runner/rollout-id/attempt` at once.

        A rollout needs one when it is queued, or running with its latest attempt failed as infra/timeout and attempts
        left. Each claimed rollout is running afterwards; the attempt row exists with status running.
        """
        ...

    def set_runner_handle(self, rollout_id: str, attempt: int, handle: str) -> Attempt: ...

    def finish_attempt(self, rollout_id: str, attempt: int, finish: AttemptFinish) -> Rollout:
        """Record the attempt's end and move the rollout accordingly.

        succeeded -> rollout succeeded; failed/task -> rollout failed; failed/infra|timeout -> rollout stays running and
        becomes claimable again while attempts remain, else failed. Finishing twice with the same outcome is a no-op;
        with a different outcome it is a Conflict.
        """
        ...

    def add_event(self, rollout_id: str, event: EventCreate, *, while_running: bool = False) -> Event:
        """Idempotent on event.id.

        `while_running` (an agent's write): AttemptEnded unless event.attempt is running, checked in
        the insert's transaction; a retry of an event stored while it ran still returns it.
        """
        ...

    def list_events(
        self, rollout_id: str, *, attempt: int | None = None, kind: str | tuple[str, ...] | None = None
    ) -> list[Event]: ...

    def add_reward(self, rollout_id: str, reward: RewardCreate, *, while_running: bool = False) -> Reward:
        """Idempotent on reward.id. `while_running` as for add_event."""
        ...

    def list_rewards(self, rollout_id: str, *, attempt: int | None = None) -> list[Reward]: ...

    def add_model_call(self, call: ModelCall) -> ModelCall:
        """Store assigns `seq` (next within the attempt) and returns the stored call."""
        ...

    def add_model_calls(self, calls: Sequence[ModelCall]) -> list[ModelCall]:
        """Several calls in one transaction (the gateway's group commit), stored calls in the same order.

        Seqs are assigned exactly as `add_model_call` would, one call after the
        other. All or nothing: an unknown rollout raises NotFound and stores none.
        """
        ...

    def add_model_calls_now(self, calls: Sequence[ModelCall]) -> list[ModelCall] | None:
        """As `add_model_calls` if no other writer must be waited for, else None and nothing stored.

        For a caller that must not block (an event loop); a store that cannot tell returns None.
        """
        ...

    def list_model_calls(self, rollout_id: str, attempt: int | None = None) -> list[ModelCall]: ...

    def add_spans(self, spans: Sequence[SpanRecord]) -> int:
        """Idempotent on (rollout_id, attempt, trace_id, span_id); returns how many were new."""
        ...

    def list_spans(self, rollout_id: str, attempt: int | None = None) -> list[SpanRecord]: ...

    def add_upstream(self, upstream: UpstreamCreate) -> Upstream: ...

    def remove_upstream(self, upstream_id: str) -> None: ...

    def list_upstreams(self) -> list[Upstream]: ...

    def current_policy_version(self) -> int:
        """0 before any version was added."""
        ...

    def list_policy_versions(self) -> list[PolicyVersion]:
        """Oldest first."""
        ...

    def add_policy_version(self, metadata: dict[str, object] | None = None) -> PolicyVersion:
        """Next version number, durably."""
        ...

    # the gateway's shared pause and the gateway processes following it
    def gateway_pause(self) -> GatewayPause: ...

    def gateway_sync(self, since_seq: int | None) -> GatewaySync:
        """The pause, the policy version and the ids of rollouts changed after `since_seq` (a rollout seq), at once."""
        ...

    def set_gateway_paused(self, paused: bool, policy: str | None = None) -> GatewayPause:
        """Pause or open every gateway on this store, or only the calls of `policy` (several policies);
        the epoch moves only when the state changes."""
        ...

    def report_gateway_replica(self, replica: GatewayReplica) -> None:
        """Insert or replace a gateway process's report."""
        ...

    def list_gateway_replicas(self) -> list[GatewayReplica]: ...

    def remove_gateway_replica(self, replica_id: str) -> None:
        """Unknown ids are ignored."""
        ...

    # training runs as their trainers report them (the dashboard reads these)
    def report_run(self, report: RunReport) -> Run:
        """Insert or update by id (a resumed run reports its id again, with its status back to running)."""
        ...

    def get_run(self, run_id: str) -> Run:
        """Raises NotFound."""
        ...

    def list_runs(self, limit: int = 100) -> list[Run]:
        """Newest first."""
        ...

    def add_run_step(self, run_id: str, report: RunStepReport) -> RunStep:
        """Idempotent per (run, step): a repeat (a resumed run's last step) merges its metrics into the stored ones,
        new values winning. NotFound for a new run."""
        ...

    def list_run_steps(self, run_id: str) -> list[RunStep]:
        """Oldest step first. Raises NotFound."""
        ...

    def add_offline_rollouts(self, items: Sequence[RolloutCreate]) -> list[tuple[Rollout, bool]]:
        """Rollouts that ran elsewhere (`alight data import`), created ended with one attempt and never claimable
        (store/offline.py); idempotent per id. Each stored rollout with whether it is new."""
        ...

    def browse_rollouts(self, where: RolloutFilter, *, offset: int = 0, limit: int = 50) -> tuple[list[Rollout], int]:
        """A page of rollouts matching `where` in creation order (a group's members adjacent), and how many match."""
        ...

    def rollouts_with_events(
        self, any_of: Sequence[str], *, none_of: Sequence[str] = (), offset: int = 0, limit: int = 100
    ) -> tuple[list[Rollout], int]:
        """A page of the rollouts (creation order) with an event of a kind in `any_of` and none of a kind in
        `none_of` (the review queue: flagged, not yet decided), and how many match in all."""
        ...

    # retention (store/retention.py)
    def purge_rollouts(self, scope: PurgeScope, *, dry_run: bool = False) -> PurgeReport:
        """Delete the ended rollouts in `scope` with every row under them and leave tombstones.

        Never a rollout a running training still needs: one not ended, one whose group has a member not
        ended, one of a run whose status is running. `scope.rollout_id` naming such a rollout is a Conflict
        saying why; an unknown rollout or run is NotFound.
        """
        ...

    def purge_run_steps(self, before: datetime, *, dry_run: bool = False) -> int:
        """Delete the step metrics reported before `before`; how many."""
        ...

    def reclaim_space(self, *, full: bool = True) -> tuple[int, int]:
        """Give freed pages back to the file system (SQLite); the database's bytes before and after."""
        ...

    def seal_runner_env_under(self, secret: str) -> None:
        """Without ALIGHT_SECRET_KEY, seal runner env values under a key derived from `secret` (the admin key)."""
        ...

    def use_data_key(self, source: KekSource) -> None:
        """Open the data keys that seal content under `source`'s key-encryption key from now on (the server's
        `data_key`, once its admin key is known)."""
        ...

    def close(self) -> None: ...
