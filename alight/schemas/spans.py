"""Spans: what OTLP ingest stores for an attempt."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class SpanRecord(BaseModel):
    """An OpenTelemetry span received over OTLP, keyed by rollout and attempt."""

    trace_id: str  # 32 hex
    span_id: str  # 16 hex
    parent_span_id: str | None = None
    rollout_id: str
    attempt: int
    name: str
    kind: int = 0
    start_time_ns: int
    end_time_ns: int | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)
    events: list[dict[str, Any]] = Field(default_factory=list)  # {"name", "time_ns", "attributes"}
    status_code: int = 0  # 0 unset, 1 ok, 2 error
    status_message: str | None = None
