"""Redaction in a real browser (Debian's Chromium via Playwright): the rollout page and its token view show marks,
never the planted secrets, until the admin asks for the exact content."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.server.redaction.planted import SECRETS, leaked
from tests.server.redaction.planted_rollout import CLEAN, ROLLOUT
from tests.server.ui.conftest import ADMIN_KEY, logged_in_tab, planted_dashboard, screenshot

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server with the operator's pattern configured, over a store holding the planted rollouts."""
    with planted_dashboard(tmp_path_factory.mktemp("redaction")) as url:
        yield url


@pytest.fixture
def tab(browser: Any, server: str) -> Iterator[Any]:
    with logged_in_tab(browser, server, ADMIN_KEY) as page:
        yield page


def _open(page: Any, server: str, rollout: str, query: str = "") -> None:
    page.goto(f"{server}/ui/#/rollout/{rollout}{query}")
    page.wait_for_function("document.getElementById('app').dataset.route === location.hash")
    page.wait_for_selector("#token-view .token-row")


def _every_text(page: Any) -> str:
    """What a person can read on the page: the text, and the titles shown on hover."""
    titles = page.locator("[title]").evaluate_all("els => els.map(e => e.title).join('\\n')")
    return page.locator("body").inner_text() + "\n" + titles


def test_the_rollout_page_shows_marks_where_the_prompt_tool_result_and_log_held_secrets(tab: Any, server: str) -> None:
    _open(tab, server, ROLLOUT)
    tab.locator("details:has(summary:text('task'))").first.evaluate("d => d.open = true")
    tab.locator("#timeline details").evaluate_all("ds => ds.forEach(d => d.open = true)")
    assert leaked(_every_text(tab)) == []
    timeline = tab.locator("#timeline").inner_text()
    assert "[REDACTED:aws_access_key]" in tab.locator("div.tool[data-span]").inner_text()  # the tool's result
    assert "[REDACTED:private_key]" in timeline and "[REDACTED:employee_id]" in timeline  # the prompt
    assert "[REDACTED:json_web_token]" in tab.locator("#log").inner_text()
    assert "redacted" in tab.locator("#redaction").inner_text()
    screenshot(tab, "redacted-rollout")
    assert tab.errors == []


def test_the_token_view_draws_each_secret_as_one_marked_block(tab: Any, server: str) -> None:
    _open(tab, server, ROLLOUT)
    blocks = tab.locator("#token-view .tok.redacted")
    kinds = set(blocks.all_inner_texts())
    assert {"[REDACTED:card]", "[REDACTED:private_key]", "[REDACTED:slack_token]", "[REDACTED:email]"} <= kinds
    titles = blocks.evaluate_all("els => els.map(e => e.title)")
    assert all("tokens hidden" in t for t in titles)
    assert blocks.evaluate_all("els => els.every(e => !e.dataset.id)")  # no token id behind a block
    assert leaked(tab.locator("#token-view").inner_text()) == []
    screenshot(tab, "redacted-tokens", "#token-view")
    assert tab.errors == []


def test_show_the_exact_content_reveals_what_was_captured(tab: Any, server: str) -> None:
    _open(tab, server, ROLLOUT)
    tab.click("#redaction a")
    tab.wait_for_function("location.hash.includes('reveal=true')")
    tab.wait_for_selector("#redaction:has-text('exact content')")
    tab.wait_for_selector("#token-view .token-row")
    # The redacted page's log and token rows may still be on screen for a moment under load: wait for the exact ones.
    tab.wait_for_function("!document.getElementById('log').innerText.includes('[REDACTED')")
    tab.wait_for_function("document.querySelectorAll('#token-view .tok.redacted').length === 0")
    assert tab.locator("#token-view .tok.redacted").count() == 0
    assert set(leaked(tab.locator("#log").inner_text())) == set(SECRETS)
    assert SECRETS["card"] in tab.locator("#token-view").inner_text()
    assert tab.errors == []


def test_a_rollout_without_secrets_reads_the_same_redacted_or_not(tab: Any, server: str) -> None:
    _open(tab, server, CLEAN)
    rows = "#token-view .token-row"
    redacted = tab.locator("#timeline").inner_text(), "\n".join(tab.locator(rows).all_inner_texts())
    assert tab.locator("#token-view .tok.redacted").count() == 0
    _open(tab, server, CLEAN, "?reveal=true")
    tab.wait_for_selector("#redaction:has-text('exact content')")
    assert (tab.locator("#timeline").inner_text(), "\n".join(tab.locator(rows).all_inner_texts())) == redacted
    assert "tokenizer.encode(text, add_special_tokens=False)" in redacted[1].replace("⏎", "")
