"""Rewards: what an agent, an evaluator or the fallback scores an attempt or one of its calls with."""

from __future__ import annotations

import enum
import math
from datetime import datetime

from pydantic import ConfigDict, Field, field_validator

from alight.schemas.strict import Label, Strict


class RewardSource(enum.StrEnum):
    AGENT = "agent"
    EVALUATOR = "evaluator"
    FALLBACK = "fallback"


class RewardCreate(Strict):
    id: Label | None = Field(default=None, min_length=1, max_length=200)
    attempt: int = Field(ge=1)
    value: float
    name: Label | None = Field(default=None, max_length=200)
    final: bool = False
    span_id: Label | None = None
    model_call_id: Label | None = None
    source: RewardSource = RewardSource.AGENT

    @field_validator("value")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError(f"reward value must be a finite number, got {v}")
        return v


class Reward(RewardCreate):
    model_config = ConfigDict(extra="ignore")
    id: str  # type: ignore[assignment]
    rollout_id: str
    created_at: datetime
