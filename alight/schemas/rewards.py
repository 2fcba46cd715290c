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
    JUDGE = "judge"  # an LLM judge's score (alight_server.trainer.judge), combined with the others by weight


# The event kind of one judge call's record beside each rollout it scored: the prompt's hash, the raw answer,
# the parsed scores, latency and tokens (or why it failed). The judge's calls are never the agent's model calls.
JUDGEMENT = "judgement"


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
