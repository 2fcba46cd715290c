"""Fixtures for the controller tests (helpers live in controller_testkit.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def logs_dir(tmp_path: Path) -> Path:
    return tmp_path / "logs"
