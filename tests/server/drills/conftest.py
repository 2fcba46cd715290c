"""Crash drills: soak variants (`-m soak`) run only when asked for, the fast ones always."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "soak" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="soak drill: run with `pytest -m soak tests/server/drills` (docs/api.md)")
    for item in items:
        if "soak" in item.keywords:
            item.add_marker(skip)
