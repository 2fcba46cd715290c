"""Events appended to a rollout (a gate's violation among them, checked against its payload shape)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, ValidationError, model_validator

from alight.schemas.gates import MAX_EVIDENCE_CHARS, REWARD_HACKING, GatePayload
from alight.schemas.strict import Label, Strict


class EventCreate(Strict):
    """An event appended to a rollout. `id` makes the append idempotent."""

    id: Label | None = Field(default=None, min_length=1, max_length=200)
    attempt: int | None = Field(default=None, ge=1)
    kind: Label = Field(min_length=1, max_length=100)
    payload: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _gate_payload_shape(self) -> EventCreate:
        if self.kind == REWARD_HACKING:
            try:
                GatePayload.model_validate(self.payload)
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'payload'}: {e['msg']}" for e in exc.errors())
                raise ValueError(
                    f"a {REWARD_HACKING} event's payload must be {{rule: snake_case name, evidence: text of at most "
                    f"{MAX_EVIDENCE_CHARS} chars}} and nothing else ({problems})"
                ) from None
        return self


class Event(BaseModel):
    id: str
    rollout_id: str
    attempt: int | None
    kind: str
    payload: dict[str, Any]
    created_at: datetime
