"""Rewards carried by MCP tool results: `alight.reward` in `_meta` or structured content becomes alight.reward().

A tool scores a step (or the whole rollout) by returning, in `_meta` or its structured content,
`{"alight.reward": 0.7}`, optionally with `"alight.reward.name": "correct"` and
`"alight.reward.final": true`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from alight import semconv

REWARD_META_KEY = semconv.EVENT_REWARD
REWARD_NAME_KEY = semconv.ATTR_REWARD_NAME
REWARD_FINAL_KEY = semconv.ATTR_REWARD_FINAL


@dataclass(frozen=True)
class ToolReward:
    value: float
    name: str | None
    final: bool


def reward_in_result(result: Any) -> ToolReward | None:
    """The reward a CallToolResult carries, or None; a non-number there is ignored (tools are not ours to crash)."""
    for carrier in (getattr(result, "meta", None), getattr(result, "structured_content", None)):
        if not isinstance(carrier, dict) or REWARD_META_KEY not in carrier:
            continue
        value = carrier[REWARD_META_KEY]
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            name = carrier.get(REWARD_NAME_KEY)
            return ToolReward(
                float(value), name if isinstance(name, str) else None, carrier.get(REWARD_FINAL_KEY) is True
            )
    return None
