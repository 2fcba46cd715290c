"""The dashboard opened with a viewer key in a real browser (Chromium via Playwright): the rollout page shows marks,
never the planted secrets, and "Show the exact content" is refused naming the reveal permission."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.server.redaction.planted import leaked
from tests.server.redaction.planted_rollout import ROLLOUT
from tests.server.ui.conftest import logged_in_tab, planted_dashboard

pytestmark = pytest.mark.timeout(300)

VIEWER_KEY = "alv_browser-viewer-key-0001"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with planted_dashboard(tmp_path_factory.mktemp("viewer"), viewer_keys=[VIEWER_KEY]) as url:
        yield url


@pytest.fixture
def tab(browser: Any, server: str) -> Iterator[Any]:
    with logged_in_tab(browser, server, VIEWER_KEY) as page:
        yield page


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
