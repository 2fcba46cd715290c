"""alight integration for autogen (instrumentation arrives with the integrations issue)."""

from __future__ import annotations


def instrument() -> None:
    """Turn on alight spans for autogen. Idempotent."""


def uninstrument() -> None:
    """Undo instrument()."""
