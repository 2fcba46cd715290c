"""Rewards carried by MCP tool results: `_meta` or structured content key `alight.reward` becomes alight.reward()."""

from __future__ import annotations

import math
from typing import Any

from alight import semconv

# A tool result says "score this step" with {"alight.reward": 0.7} in `_meta` or structuredContent.
REWARD_META_KEY = semconv.EVENT_REWARD


def reward_in_result(result: Any) -> float | None:
    """The reward a CallToolResult carries, or None; a non-number there is ignored (tools are not ours to crash)."""
    for carrier in (getattr(result, "meta", None), getattr(result, "structured_content", None)):
        if isinstance(carrier, dict) and REWARD_META_KEY in carrier:
            value = carrier[REWARD_META_KEY]
            if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                return float(value)
    return None
