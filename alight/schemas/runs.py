"""Training runs as their trainer reports them: status, config and each step's metrics."""

from __future__ import annotations

import enum
import math
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, field_validator

from alight.schemas.strict import Strict


class RunStatus(enum.StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class RunReport(Strict):
    """A training run as its trainer reports it at start and end; reporting an id again updates it."""

    id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:-]+$")
    status: RunStatus = RunStatus.RUNNING
    config: dict[str, Any] = Field(default_factory=dict)
    steps_planned: int | None = Field(default=None, ge=0, le=2**31 - 1)


class Run(BaseModel):
    id: str
    status: RunStatus
    config: dict[str, Any]
    steps_planned: int | None
    step: int | None = Field(description="the newest step with reported metrics; null before any")
    created_at: datetime
    updated_at: datetime


class RunStepReport(Strict):
    """One step's metrics (`train/reward_mean`, `val/score`, `time/rollouts_s`, ...); finite numbers only."""

    step: int = Field(ge=0, le=2**31 - 1)
    metrics: dict[str, float] = Field(max_length=1000)

    @field_validator("metrics")
    @classmethod
    def _finite(cls, metrics: dict[str, float]) -> dict[str, float]:
        bad = sorted(k for k, v in metrics.items() if not math.isfinite(v))
        if bad:
            raise ValueError(f"metrics must be finite numbers; drop NaN/inf values of {bad[:5]}")
        return metrics


class RunStep(BaseModel):
    run_id: str
    step: int
    metrics: dict[str, float]
    created_at: datetime
