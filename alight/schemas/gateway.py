"""The gateway replicas' shared state: the pause they follow and how each last reported itself."""

from __future__ import annotations

from pydantic import BaseModel, Field


class GatewayPause(BaseModel):
    """The pause every gateway replica on one store follows; `epoch` moves on each pause and resume."""

    paused: bool
    epoch: int


class GatewayReplica(BaseModel):
    """One gateway process serving from a store, as it last reported itself."""

    id: str
    address: str = Field(description="host:pid, for people")
    paused: bool
    pause_epoch: int = Field(description="the newest pause epoch this replica has applied")
    in_flight: int
    reported_at: float = Field(description="unix time of the report")
