"""The dashboard's page for a purged rollout: over HTTP and in a real browser, it says when and why, not an error."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_server.store import open_store
from alight_server.store.base import PurgeScope
from alight_server.store.keys.kek import KekSource
from tests.server.retention_data import ended
from tests.server.ui.conftest import logged_in_tab

ADMIN_KEY = "alk_purged-page-key"
REASON = "erasure request 12"
AUTH = {"Authorization": f"Bearer {ADMIN_KEY}"}


@dataclass
class Served:
    url: str
    api: httpx.Client


@pytest.fixture
def served(sqlite_url: str) -> Iterator[Served]:
    """A server whose store holds one purged rollout (`gone`) and one kept (`kept`)."""
    store = open_store(sqlite_url, KekSource.parse("secret", admin_key=ADMIN_KEY))
    ended(store, "gone")
    ended(store, "kept")
    store.purge_rollouts(PurgeScope(rollout_id="gone", reason=REASON))
    config = ServerConfig(admin_key=ADMIN_KEY, db_url=sqlite_url, port=free_port())
    app = create_app(config, store=store)
    with ServerThread(app, port=config.port) as url, httpx.Client(base_url=url, headers=AUTH) as api:
        yield Served(url, api)
    store.close()


def test_the_rollout_pages_json_answers_gone_with_the_purge_date(served: Served) -> None:
    answer = served.api.get("/api/ui/rollouts/gone/view")
    assert answer.status_code == 410
    assert "was purged on" in answer.json()["error"]["message"]
    assert REASON in answer.json()["error"]["message"]
    assert served.api.get("/ui/").status_code == 200  # the page itself


def test_a_purged_rollouts_page_in_the_browser_says_purged_on_its_date(browser: Any, served: Served) -> None:
    with logged_in_tab(browser, served.url, ADMIN_KEY) as page:
        page.goto(f"{served.url}/ui/#/rollout/gone")
        page.wait_for_selector("#purged")
        assert page.locator("#purged h1").inner_text() == "Rollout gone purged"
        message = page.locator("#purged .purged-message").inner_text()
        assert "was purged on" in message and REASON in message
        assert page.locator("p.error").count() == 0
        page.goto(f"{served.url}/ui/#/rollout/kept")  # a rollout still there renders as before
        page.wait_for_selector("#timeline")
        assert page.locator("#purged").count() == 0
        # the browser logs the purged rollout's expected 410; nothing else may go wrong
        assert [e for e in page.errors if "status of 410 (Gone)" not in e] == []
