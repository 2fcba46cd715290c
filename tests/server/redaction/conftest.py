"""Redaction tests: the live server (tests/conftest.py) runs with the operator's pattern in its `redaction:` config."""

from __future__ import annotations

import pytest

from alight_server.config import ServerConfig
from alight_server.redaction import PatternRule, RedactionConfig
from alight_server.stacks.server_thread import free_port
from tests.conftest import ADMIN_KEY
from tests.server.redaction.planted import PATTERN


@pytest.fixture
def server_config(sqlite_url: str) -> ServerConfig:
    """The live server's config, with the operator's own pattern in its `redaction:` section."""
    return ServerConfig(
        admin_key=ADMIN_KEY,
        db_url=sqlite_url,
        port=free_port(),
        redaction=RedactionConfig(patterns=[PatternRule(**PATTERN)]),
    )
