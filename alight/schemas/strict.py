"""Request bodies' base: a model that refuses unknown fields."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """Request bodies: unknown fields are an error, not silently dropped."""

    model_config = ConfigDict(extra="forbid")
