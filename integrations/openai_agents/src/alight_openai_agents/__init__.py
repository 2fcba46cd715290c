"""alight integration for openai-agents (instrumentation arrives with the integrations issue)."""

from __future__ import annotations


def instrument() -> None:
    """Turn on alight spans for openai-agents. Idempotent."""


def uninstrument() -> None:
    """Undo instrument()."""
