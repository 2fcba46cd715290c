"""Test doubles that speak real protocols: an OpenAI-compatible upstream shaped like vLLM."""

from __future__ import annotations

from alight_testing.fake_model import FakeModel, FakeTokenizer, default_tool_rule
from alight_testing.fake_upstream import FakeUpstreamState, Faults, LoggedCall, create_fake_upstream

__all__ = [
    "FakeModel",
    "FakeTokenizer",
    "FakeUpstreamState",
    "Faults",
    "LoggedCall",
    "create_fake_upstream",
    "default_tool_rule",
]
