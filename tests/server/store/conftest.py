"""The store contract runs against every backend: SQLite always, PostgreSQL when the test command started one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from alight_server.store.sql import SqlStore


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest) -> str:
    fixture = "sqlite_url" if request.param == "sqlite" else "pg_store_url"
    return request.getfixturevalue(fixture)


@pytest.fixture
def any_store(store_url: str) -> Iterator[SqlStore]:
    s = SqlStore(store_url)
    yield s
    s.close()
