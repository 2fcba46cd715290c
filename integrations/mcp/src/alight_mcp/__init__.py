"""alight integration for MCP: client requests become spans, and a tool result can carry a reward."""

from __future__ import annotations

from alight_mcp.instrumentor import SUPPORTED_VERSIONS, instrument, is_instrumented, result_text, uninstrument
from alight_mcp.rewards import REWARD_META_KEY, ToolReward, reward_in_result

__all__ = [
    "REWARD_META_KEY",
    "SUPPORTED_VERSIONS",
    "ToolReward",
    "instrument",
    "is_instrumented",
    "result_text",
    "reward_in_result",
    "uninstrument",
]
