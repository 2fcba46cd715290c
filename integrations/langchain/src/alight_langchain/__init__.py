"""alight integration for langchain (instrumentation arrives with the integrations issue)."""

from __future__ import annotations


def instrument() -> None:
    """Turn on alight spans for langchain. Idempotent."""


def uninstrument() -> None:
    """Undo instrument()."""
