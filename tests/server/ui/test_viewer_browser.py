"""The dashboard opened with a viewer key in a real browser (Chromium via Playwright): the rollout page shows marks,
never the planted secrets, and "Show the exact content" is refused naming the reveal permission."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.redaction import PatternRule, RedactionConfig
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_server.store import open_store
from tests.server.redaction.planted import PATTERN, leaked
from tests.server.redaction.planted_rollout import ROLLOUT, plant_run
from tests.server.ui.conftest import ADMIN_KEY

pytestmark = pytest.mark.timeout(300)

VIEWER_KEY = "alv_browser-viewer-key-0001"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = f"sqlite:///{tmp_path_factory.mktemp('viewer') / 'alight.db'}"
    config = ServerConfig(
        admin_key=ADMIN_KEY,
        db_url=db,
        port=free_port(),
        viewer_keys=[VIEWER_KEY],
        redaction=RedactionConfig(patterns=[PatternRule(**PATTERN)]),  # the operator's own pattern too
    )
    store = open_store(db, config.kek_source())
    plant_run(store)
    with ServerThread(create_app(config, store=store), port=config.port) as url:
        yield url
    store.close()


@pytest.fixture
def tab(browser: Any, server: str) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(f"{server}/ui/")
    page.fill("#admin-key", VIEWER_KEY)
    page.click("button[type=submit]")
    page.wait_for_selector("h1:has-text('Training runs')")
    yield page
    context.close()


def test_a_viewer_sees_the_rollout_page_with_marks_and_no_secret(tab: Any, server: str) -> None:
    tab.goto(f"{server}/ui/#/rollout/{ROLLOUT}")
    tab.wait_for_selector("#token-view .token-row")
    assert tab.locator("#token-view .tok.redacted").count() > 0
    assert leaked(tab.locator("body").inner_text()) == []


def test_a_viewer_asking_for_the_exact_content_is_told_it_needs_the_reveal_permission(tab: Any, server: str) -> None:
    tab.goto(f"{server}/ui/#/rollout/{ROLLOUT}")
    tab.wait_for_selector("#token-view .token-row")
    tab.click("#redaction a")
    tab.wait_for_selector(".error:has-text('reveal permission')")
    assert leaked(tab.locator("body").inner_text()) == []
