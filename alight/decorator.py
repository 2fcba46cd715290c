"""TODO: @alight.rollout."""

from __future__ import annotations

from typing import Any


def rollout(fn: Any) -> Any:
    return fn
