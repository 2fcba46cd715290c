"""Discovery of installed integrations through the `alight.integrations` entry point."""

from __future__ import annotations

from importlib.metadata import entry_points


def instrument_all() -> list[str]:
    """Call instrument() of every installed alight integration; return their names."""
    names = []
    for ep in entry_points(group="alight.integrations"):
        ep.load()()
        names.append(ep.name)
    return sorted(names)
