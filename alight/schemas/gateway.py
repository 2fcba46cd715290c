"""The gateway replicas' shared state: the pause they follow, how each last reported itself, what each follows."""

from __future__ import annotations

from pydantic import BaseModel, Field


class GatewayPause(BaseModel):
    """The pause every gateway replica on one store follows; `epoch` moves on each pause and resume."""

    paused: bool
    epoch: int
    policies: list[str] = Field(default_factory=list, description="policies paused on their own, sorted")


class GatewayReplica(BaseModel):
    """One gateway process serving from a store, as it last reported itself."""

    id: str
    address: str = Field(description="host:pid, for people")
    paused: bool
    pause_epoch: int = Field(description="the newest pause epoch this replica has applied")
    in_flight: int
    reported_at: float = Field(description="unix time of the report")
    in_flight_by_policy: dict[str, int] = Field(
        default_factory=dict, description="several policies: its calls in flight per policy (routed calls only)"
    )


class GatewaySync(BaseModel):
    """What a gateway follows in the store, read at once: the pause, the policy version, rollout changes.

    `changed` holds the ids of the rollouts changed after the `since_seq` asked for, up to and including
    `rollout_seq` (oldest change first); None when that is not known in full (no `since_seq`, or more changes than
    the read returns), so whatever was cached about rollouts must be dropped.
    """

    pause: GatewayPause
    policy_version: int
    rollout_seq: int
    changed: list[str] | None
