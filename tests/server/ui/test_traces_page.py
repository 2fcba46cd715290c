"""The dashboard's check page of an imported run: the same report as `alight data check`, over HTTP and in a browser."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_server.store import open_store
from alight_server.store.keys.kek import KekSource
from alight_server.traces.formats import openai_log
from alight_server.traces.importer import import_traces
from alight_server.traces.render import Renderer
from alight_testing import create_fake_upstream
from tests.server.traces.conftest import log_conversation
from tests.server.ui.conftest import logged_in_tab

ADMIN_KEY = "alk_traces-page-key"
AUTH = {"Authorization": f"Bearer {ADMIN_KEY}"}
CUSTOM_CALL = {
    "request": {"model": "policy", "messages": [{"role": "user", "content": "patch it"}]},
    "response": {"choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "ct1", "type": "custom", "custom": {"name": "apply_patch", "input": "*** Begin Patch"}}]}}]},
}  # fmt: skip


@dataclass
class Served:
    url: str
    api: httpx.Client


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Imported as run `prod`: a conversation whose tools vanish on its second turn, and one no template renders."""
    folder = tmp_path_factory.mktemp("traces-page")
    logs = folder / "calls.jsonl"
    with ServerThread(create_fake_upstream(model="policy")) as fake:
        log_conversation(fake + "/v1", logs, "call get_weather", ids=False, tools_on_second=False)
    with logs.open("a") as f:
        f.write(json.dumps(CUSTOM_CALL) + "\n")
    url = f"sqlite:///{folder / 'alight.db'}"
    store = open_store(url, KekSource.parse("secret", admin_key=ADMIN_KEY))
    import_traces(store, "prod", "openai", openai_log.read([logs]), Renderer.for_model("tiny"))
    config = ServerConfig(admin_key=ADMIN_KEY, db_url=url, port=free_port())
    with (
        ServerThread(create_app(config, store=store), port=config.port) as server,
        httpx.Client(base_url=server, headers=AUTH, timeout=60) as api,
    ):
        yield Served(server, api)
    store.close()


def test_the_check_route_answers_the_reports_breaks_and_first_differing_tokens(served: Served) -> None:
    answer = served.api.get("/api/ui/runs/prod/check")
    assert answer.status_code == 200, answer.text
    check = answer.json()["check"]
    assert check["breaks"] == {"template_drift": 1}
    drifted = next(t for t in check["trajectories"] if t["calls"] == 2)
    (divergence,) = drifted["divergences"]
    assert divergence["prompt_text"].startswith("<|im_end|>")  # decoded with the model the import rendered for
    left = next(t for t in check["trajectories"] if t["left_out"])
    assert "cannot render" in left["unrendered"][0]
    assert served.api.get("/api/ui/runs/nope/check").status_code == 404


def test_the_check_page_in_the_browser_shows_the_report_and_is_linked_from_the_run(
    browser: Any, served: Served
) -> None:
    with logged_in_tab(browser, served.url, ADMIN_KEY) as page:
        page.goto(f"{served.url}/ui/#/run/prod")
        page.click("a:has-text('check report')")
        page.wait_for_selector("table#check")
        assert page.locator("h1").inner_text() == "Check prod"
        assert "prefix breaks template_drift 1" in page.locator("#check-totals").inner_text()
        cells = page.locator("table#check td.divergence").all_inner_texts()
        assert any("call 1 token" in c and "template_drift" in c and "<|im_end|>" in c for c in cells)
        assert "cannot render" in page.locator("#unrendered").inner_text()
        page.screenshot(path=str(_artifacts() / "check-page.png"), full_page=True)
        assert page.errors == []


def _artifacts() -> Path:
    from tests.server.ui.conftest import SCREENSHOTS

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
