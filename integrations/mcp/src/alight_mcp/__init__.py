"""alight integration for mcp (instrumentation arrives with the integrations issue)."""

from __future__ import annotations


def instrument() -> None:
    """Turn on alight spans for mcp. Idempotent."""


def uninstrument() -> None:
    """Undo instrument()."""
